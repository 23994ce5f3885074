/* anvil tune MODEL: measures, on this machine, which implementation of each of the model's
 * distinct problems is fastest, and keeps the winners in the tuning database that every session
 * reads (src/tune, src/runtime/autotune.c). With --train, the problems are those of the model's
 * training graph (forward, loss and backward nodes, and each conv layer's grouped choice), for
 * the batch shapes of a training set, measured through anvil_train_tune as `anvil train --tune
 * offline` measures them.
 *
 * Like `anvil db`, the tool reaches the runtime and src/tune directly: the public API exposes
 * sessions that use the database, not the tuner's report. */
#include "cli.h"

#include "api/api.h"
#include "api/env.h"
#include "runtime/runtime.h"
#include "cmd_tune.h"
#include "train_common.h"

#include <cjson/cJSON.h>
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

typedef struct progress_ctx {
    bool on;
    int measured; /* problems measured so far (cached ones take no time) */
    double measured_s;
} progress_ctx;

static double elapsed(const rt_tune_run *r) {
    return (double)(core_now_ns() - r->t0) / 1e9;
}

/* ETA from the measured problems' average; cached ones are nearly free. */
static double eta(const rt_tune_run *r, const progress_ctx *p) {
    int left = r->n_items - r->done;
    double per = p->measured ? p->measured_s / p->measured : 1.0;
    double e = per * left;
    if (r->budget_seconds > 0 && e > r->budget_seconds - elapsed(r))
        e = r->budget_seconds - elapsed(r);
    return e > 0 ? e : 0;
}

static void show_line(const rt_tune_run *r, const progress_ctx *p, int item, int alive,
                      double best_ns) {
    const rt_tune_item *it = &r->items[item];
    char best[32] = "-";
    if (best_ns > 0) snprintf(best, sizeof best, "%.3f ms", best_ns / 1e6);
    fprintf(stderr, "\r\033[K[%d/%d] %-14.14s %-24.24s %3d left  best %-11s %5.0fs  ETA %4.0fs",
            item + 1, r->n_items, it->op, it->node, alive, best, elapsed(r), eta(r, p));
    fflush(stderr);
}

static void on_progress(void *arg, const rt_tune_run *r, int item) {
    progress_ctx *p = arg;
    const rt_tune_item *it = &r->items[item];
    if (!it->cached && !it->skipped) {
        p->measured++;
        p->measured_s += it->seconds;
    }
    if (p->on) show_line(r, p, item, 0, it->winner >= 0 ? it->cands[it->winner].median_ns : 0);
}

static void on_round(void *arg, const rt_tune_run *r, int item, int alive, double best_ns) {
    progress_ctx *p = arg;
    if (p->on) show_line(r, p, item, alive, best_ns);
}

/* ---- before / after --------------------------------------------------------------------------
 */

/* ---- report ----------------------------------------------------------------------------------
 */

static const char *state_name(tune_cand_state s) {
    switch (s) {
    case TUNE_CAND_ALIVE:
        return "timed";
    case TUNE_CAND_FAILED:
        return "failed";
    case TUNE_CAND_WRONG:
        return "wrong";
    case TUNE_CAND_SLOW:
        return "pruned";
    case TUNE_CAND_UNTIMED:
        return "untimed";
    }
    return "?";
}

static const char *item_status(const rt_tune_item *it) {
    return !it->settled  ? "unused"
           : it->cached  ? "cached"
           : it->skipped ? "skipped"
           : it->failed  ? "failed"
                         : "tuned";
}

/* The group's chosen choice: the one its record names. */
static int group_choice(const rt_tune_item *it) {
    for (int k = 0; k < it->n_choices; k++)
        if (!strcmp(it->record.variant, it->choice_names[k])) return k;
    return -1;
}

static double item_speedup(const rt_tune_item *it) {
    if (it->group) {
        int w = group_choice(it);
        return w >= 0 && it->choice_ms[w] > 0 && it->choice_ms[it->rule] > 0
                   ? it->choice_ms[it->rule] / it->choice_ms[w]
                   : 0;
    }
    if (it->winner < 0 || it->cascade < 0) return 0;
    const tune_candidate *w = &it->cands[it->winner], *c = &it->cands[it->cascade];
    return w->median_ns > 0 && c->reps ? c->median_ns / w->median_ns : 0;
}

static void print_text(const tune_args *a, const rt_tune_run *r, const char *db_path,
                       double t_cascade, double t_tuned) {
    int tuned = 0, cached = 0, skipped = 0, failed = 0, changed = 0;
    printf("%-4s %-12s %-22s %5s %11s %-46s %10s %8s\n", "#", "op", "first node", "nodes",
           "candidates", "winner", "median", "vs casc.");
    for (int i = 0; i < r->n_items; i++) {
        const rt_tune_item *it = &r->items[i];
        char cands[32] = "-", winner[TUNE_VARIANT_MAX + TUNE_PARAMS_MAX + 8] = "-", med[24] = "-",
             sp[16] = "-";
        if (it->n_cands) snprintf(cands, sizeof cands, "%d/%d", it->stats.kept, it->stats.raw);
        if (it->group) snprintf(cands, sizeof cands, "%d choices", it->n_choices);
        if (it->cached || it->winner >= 0 || (it->group && it->record.variant[0])) {
            snprintf(winner, sizeof winner, "%s%s%s%s", it->record.variant,
                     it->record.params[0] ? " [" : "", it->record.params,
                     it->record.params[0] ? "]" : "");
            snprintf(med, sizeof med, "%.3f ms", it->record.median_ns / 1e6);
        }
        double s = item_speedup(it);
        if (s > 0) snprintf(sp, sizeof sp, "%.2fx", s);
        if (it->skipped)
            snprintf(winner, sizeof winner, "(skipped: %s)", r->stopped ? "stopped" : "budget");
        if (it->failed) snprintf(winner, sizeof winner, "(failed: %.120s)", it->error);
        if (it->reverted) snprintf(sp, sizeof sp, "kept");
        printf("%-4d %-12.12s %-22.22s %5d %11s %-46.46s %10s %8s\n", i + 1, it->op, it->node,
               it->nodes, cands, winner, med, sp);
        tuned += it->settled && !it->cached && !it->skipped && !it->failed;
        cached += it->cached;
        skipped += it->skipped;
        failed += it->failed;
        changed += it->winner >= 0 && it->winner != it->cascade;
        changed +=
            it->group && !it->cached && group_choice(it) >= 0 && group_choice(it) != it->rule;
        if (a->verbose && it->group && !it->cached)
            for (int k = 0; k < it->n_choices; k++)
                printf("       %c %-34s whole model %10.3f ms%s\n",
                       !strcmp(it->record.variant, it->choice_names[k]) ? '*' : ' ',
                       it->choice_names[k], it->choice_ms[k], k == it->rule ? "  (rule)" : "");
        if (!a->verbose || !it->n_cands) continue;
        for (int k = 0; k < it->stats.n_rules; k++)
            printf("       rule '%s' removed %d\n", it->stats.rules[k].name,
                   it->stats.rules[k].removed);
        for (int k = 0; k < it->n_cands; k++) {
            const tune_candidate *c = &it->cands[k];
            char params[TUNE_PARAMS_MAX];
            tune_params_format(c->v, &c->cfg, c->threads, params, sizeof params);
            printf("       %c %-34s %-28s %-7s %10.3f ms  err %.1e%s\n",
                   k == it->winner ? '*' : ' ', c->v->name, params, state_name(c->state),
                   c->median_ns / 1e6, c->max_err, c->cascade ? "  (cascade)" : "");
        }
    }
    printf("\nproblems: %d (%d tuned, %d from the database, %d skipped, %d failed); "
           "%d differ from the cascade\n",
           r->n_items, tuned, cached, skipped, failed, changed);
    if (r->reverted)
        printf("checked in the model: %d problem(s) whose winner ran slower in place than the "
               "cascade keep the cascade ('kept')\n",
               r->reverted);
    if (r->model_cascade_ms > 0)
        printf("checked the whole model (alternating): cascade %.3f ms, tuned %.3f ms%s\n",
               r->model_cascade_ms, r->model_tuned_ms,
               r->model_reverted ? "; tuned was slower, so this run's other choices that differ "
                                   "from the cascade went back to it ('kept')"
                                 : "");
    printf("tuning time: %.1f s   database: %s\n", r->seconds, db_path);
    if (t_cascade > 0)
        printf("model latency (median of %lld, alternating): cascade %.3f ms, tuned %.3f ms "
               "(%.2fx)\n",
               a->runs, t_cascade, t_tuned, t_cascade / t_tuned);
    if (r->stopped) printf("stopped: rerun the same command to resume\n");
}

static cJSON *item_json(const rt_tune_item *it) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", it->op);
    cJSON_AddStringToObject(o, "node", it->node);
    cJSON_AddNumberToObject(o, "nodes", it->nodes);
    cJSON_AddStringToObject(o, "key", it->problem.key);
    cJSON_AddStringToObject(o, "status", item_status(it));
    if (it->failed) cJSON_AddStringToObject(o, "error", it->error);
    if (it->cached || it->winner >= 0) {
        cJSON_AddStringToObject(o, "winner", it->record.variant);
        cJSON_AddStringToObject(o, "params", it->record.params);
        cJSON_AddNumberToObject(o, "median_ns", it->record.median_ns);
        cJSON_AddNumberToObject(o, "max_err", it->record.max_err);
    }
    double s = item_speedup(it);
    if (s > 0) cJSON_AddNumberToObject(o, "speedup_vs_cascade", s);
    if (it->reverted) {
        cJSON_AddBoolToObject(o, "kept_cascade_in_model", true);
        cJSON_AddNumberToObject(o, "in_model_tuned_ns", it->in_model_tuned_ns);
        cJSON_AddNumberToObject(o, "in_model_cascade_ns", it->in_model_cascade_ns);
    }
    if (it->group) {
        cJSON_AddBoolToObject(o, "group", true);
        cJSON_AddStringToObject(o, "rule", it->choice_names[it->rule]);
        cJSON *ch = cJSON_AddObjectToObject(o, "model_ms_by_choice");
        for (int k = 0; k < it->n_choices && !it->cached; k++)
            cJSON_AddNumberToObject(ch, it->choice_names[k], it->choice_ms[k]);
    }
    if (!it->n_cands) return o;
    cJSON_AddNumberToObject(o, "raw_configurations", it->stats.raw);
    cJSON *rules = cJSON_AddObjectToObject(o, "removed_by_rule");
    for (int k = 0; k < it->stats.n_rules; k++)
        cJSON_AddNumberToObject(rules, it->stats.rules[k].name, it->stats.rules[k].removed);
    cJSON *cs = cJSON_AddArrayToObject(o, "candidates");
    for (int k = 0; k < it->n_cands; k++) {
        const tune_candidate *c = &it->cands[k];
        char params[TUNE_PARAMS_MAX];
        tune_params_format(c->v, &c->cfg, c->threads, params, sizeof params);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "variant", c->v->name);
        cJSON_AddStringToObject(j, "params", params);
        cJSON_AddStringToObject(j, "state", state_name(c->state));
        if (c->state == TUNE_CAND_SLOW) cJSON_AddNumberToObject(j, "pruned_after_round", c->round);
        cJSON_AddNumberToObject(j, "median_ns", c->median_ns);
        cJSON_AddNumberToObject(j, "spread", c->spread);
        cJSON_AddNumberToObject(j, "reps", c->reps);
        cJSON_AddNumberToObject(j, "max_err", c->max_err);
        cJSON_AddBoolToObject(j, "cascade", c->cascade);
        cJSON_AddBoolToObject(j, "winner", k == it->winner);
        cJSON_AddItemToArray(cs, j);
    }
    return o;
}

static int print_json(const tune_args *a, const rt_tune_run *r, const char *db_path, const char *fp,
                      double t_cascade, double t_tuned) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", a->model);
    cJSON_AddStringToObject(root, "database", db_path);
    cJSON_AddStringToObject(root, "fingerprint", fp);
    cJSON_AddNumberToObject(root, "threads", (double)a->threads);
    cJSON_AddNumberToObject(root, "seconds", r->seconds);
    cJSON_AddBoolToObject(root, "stopped", r->stopped);
    if (t_cascade > 0) {
        cJSON_AddNumberToObject(root, "cascade_ms", t_cascade);
        cJSON_AddNumberToObject(root, "tuned_ms", t_tuned);
    }
    if (r->model_cascade_ms > 0) {
        cJSON *mc = cJSON_AddObjectToObject(root, "model_check");
        cJSON_AddNumberToObject(mc, "cascade_ms", r->model_cascade_ms);
        cJSON_AddNumberToObject(mc, "tuned_ms", r->model_tuned_ms);
        cJSON_AddNumberToObject(mc, "reverted", r->model_reverted);
    }
    cJSON *items = cJSON_AddArrayToObject(root, "problems");
    for (int i = 0; i < r->n_items; i++) cJSON_AddItemToArray(items, item_json(&r->items[i]));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    puts(text);
    free(text);
    return CLI_EXIT_OK;
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
    tune_db *db = NULL;
    rt_tune_run run = {0};
    char db_path[4096], fp[TUNE_FINGERPRINT_MAX];
    if (code >= 0) goto done;
    code = CLI_EXIT_OK;
    anvil_status s;
    if ((code = cli_tuning_db_path(a.db, db_path, sizeof db_path)) != 0) goto done;
    if (a.train) {
        code = cli_tune_train(&a, db_path);
        goto done;
    }
    if ((s = anvil_model_load(a.model, &m)) != ANVIL_OK ||
        (s = tune_fingerprint(fp, sizeof fp)) != ANVIL_OK ||
        (s = tune_db_open(db_path, &db)) != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    if ((code = cli_inputs_resolve(m, &a.inputs)) != 0) goto done;
    size_t n_in = anvil_model_input_count(m);
    bi = calloc(n_in + 1, sizeof *bi);
    in = calloc(n_in + 1, sizeof *in);
    if (!bi || !in) {
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((code = cli_model_inputs(&a.inputs, &a.shapes, m, bi, n_in)) != 0) goto done;
    for (size_t i = 0; i < n_in; i++) in[i] = bi[i].t;
    if (a.threads <= 0)
        a.threads = core_hw_get()->logical_cores > 0 ? core_hw_get()->logical_cores : 1;
    const ir_graph *g = api_model_graph(m);
    /* the environment's settings, then the options (api/env.h) */
    rt_session_config cfg = {.threads = (int)a.threads, .opt_level = (int)a.opt_level};
    anvil_status es = api_env_session(&cfg);
    if (es != ANVIL_OK) {
        code = cli_fail_status(es);
        goto done;
    }
    cfg.passes_off |= a.passes_off;
    progress_ctx pc = {.on = !a.quiet && isatty(STDERR_FILENO)};
    run.db = db;
    run.fingerprint = fp;
    run.retune = a.retune;
    run.budget_seconds = (double)a.budget;
    run.stop = &g_stop;
    run.progress = on_progress;
    run.round = on_round;
    run.arg = &pc;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    s = rt_tune_graph(g, &cfg, in, &run);
    sigaction(SIGINT, &old, NULL);
    if (pc.on) fprintf(stderr, "\r\033[K");
    if (s != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    double t_cascade = 0, t_tuned = 0;
    if (a.runs > 0 && !run.stopped &&
        (s = rt_cascade_vs_db(g, &cfg, db, fp, in, 3, (int)a.runs, &t_cascade, &t_tuned)) !=
            ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    if (a.json)
        code = print_json(&a, &run, db_path, fp, t_cascade, t_tuned);
    else
        print_text(&a, &run, db_path, t_cascade, t_tuned);
done:
    rt_tune_run_free(&run);
    tune_db_close(db);
    free(in);
    cli_model_inputs_free(bi, bi ? anvil_model_input_count(m) : 0);
    anvil_model_free(m);
    cli_inputs_free(&a.inputs);
    cli_shapes_free(&a.shapes);
    return code;
}
