/* anvil_tune_model: `anvil tune` as a library call. The offline driver (src/autotune) does the
 * measuring; this file turns the public options into its run, its callbacks into progress
 * reports with an ETA, and its items into the report that the CLI prints and Python returns, so
 * the tool, the bindings and C users all get the same numbers and the same text. */
#include "api.h"

#include "autotune/autotune.h"
#include "env.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct anvil_tune_report {
    autotune_run run;
    char db_path[4096];
    char fingerprint[TUNE_FINGERPRINT_MAX];
    char *model_label; /* owned */
    int threads, runs;
    double cascade_ms, tuned_ms; /* 0: not measured */
    char *text, *json;           /* the last formatting asked for (owned) */
    /* progress: problems measured so far and their time, for the ETA (cached ones are free) */
    const anvil_tune_options *opts;
    int measured;
    double measured_s;
};

void anvil_tune_options_default(anvil_tune_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->runs = 20;
}

/* ---- progress ------------------------------------------------------------------------------- */

static double elapsed(const autotune_run *r) {
    return (double)(core_now_ns() - r->t0) / 1e9;
}

/* ETA from the measured problems' average; cached ones are nearly free. */
static double eta(const anvil_tune_report *rep) {
    const autotune_run *r = &rep->run;
    int left = r->n_items - r->done;
    double per = rep->measured ? rep->measured_s / rep->measured : 1.0;
    double e = per * left;
    if (r->budget_seconds > 0 && e > r->budget_seconds - elapsed(r))
        e = r->budget_seconds - elapsed(r);
    return e > 0 ? e : 0;
}

static void report_progress(const anvil_tune_report *rep, int item, int alive, double best_ns) {
    const autotune_item *it = &rep->run.items[item];
    anvil_tune_progress p = {.item = item,
                             .n_items = rep->run.n_items,
                             .op = it->op,
                             .node = it->node,
                             .alive = alive,
                             .best_ms = best_ns / 1e6,
                             .elapsed_s = elapsed(&rep->run),
                             .eta_s = eta(rep)};
    rep->opts->progress(rep->opts->progress_arg, &p);
}

static void on_settled(void *arg, const autotune_run *r, int item) {
    anvil_tune_report *rep = arg;
    const autotune_item *it = &r->items[item];
    if (!it->cached && !it->skipped) {
        rep->measured++;
        rep->measured_s += it->seconds;
    }
    if (rep->opts->progress)
        report_progress(rep, item, 0, it->winner >= 0 ? it->cands[it->winner].median_ns : 0);
}

static void on_round(void *arg, const autotune_run *r, int item, int alive, double best_ns) {
    (void)r;
    anvil_tune_report *rep = arg;
    if (rep->opts->progress) report_progress(rep, item, alive, best_ns);
}

/* ---- the call ------------------------------------------------------------------------------ */

/* The database file the tune writes: the one named, else the default path (which must not be
 * turned off, since a tune has to write somewhere). */
static anvil_status db_path_of(const api_options_summary *so, char *buf, size_t cap) {
    if (so->db_set && so->db_path) {
        if (!so->db_path[0])
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "anvil_tune_model: the session options name no tuning database (\"\"); "
                            "a tune writes its winners to one: name a file");
        if ((size_t)snprintf(buf, cap, "%s", so->db_path) >= cap)
            return core_err(ANVIL_ERR_LIMIT, "the database path is too long");
        return ANVIL_OK;
    }
    const tune_path_env env = api_env_tune_paths();
    CORE_TRY(tune_db_default_path(&env, buf, cap, true));
    if (!buf[0])
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "$ANVIL_TUNING_DB is 'off': name the database to tune into");
    return ANVIL_OK;
}

static anvil_status tune(const anvil_model *model, const anvil_tune_options *o,
                         const anvil_tensor *const *bound, anvil_tune_report *rep) {
    api_options_summary so;
    api_options_summarize(o->session, &so);
    CORE_TRY(db_path_of(&so, rep->db_path, sizeof rep->db_path));
    CORE_TRY(tune_fingerprint(rep->fingerprint, sizeof rep->fingerprint));
    const ir_graph *g = api_model_graph(model);
    /* the sessions' configuration (environment and options), less what a tune does not use:
     * forced variants, online tuning, profiling */
    rt_session_config cfg;
    CORE_TRY(api_session_config(o->session, &cfg));
    api_precision_warn(&cfg);
    cfg.forces = NULL;
    cfg.n_forces = 0;
    cfg.online_rounds = 0;
    cfg.profiling = false;
    cfg.emittable_only = false;
    if (cfg.threads < 1) cfg.threads = 1;
    rep->threads = cfg.threads;
    tune_db *db = NULL;
    CORE_TRY(tune_db_open(rep->db_path, &db));
    autotune_run *run = &rep->run;
    run->db = db;
    run->fingerprint = rep->fingerprint;
    run->retune = o->retune != 0;
    run->budget_seconds = o->budget_seconds;
    run->stop = o->stop;
    run->progress = on_settled;
    run->round = on_round;
    run->arg = rep;
    /* Under precision auto a bf16 candidate is kept only within the session's tolerance: the
     * measurement that decides which nodes compute in bf16. */
    if (cfg.knobs.precision == KERN_PREC_AUTO) run->prof.tolerance_bf16 = cfg.tolerance;
    anvil_status st = autotune_graph(g, &cfg, bound, run);
    if (st == ANVIL_OK && rep->runs > 0 && !run->stopped)
        st = autotune_cascade_vs_db(g, &cfg, db, rep->fingerprint, bound, 3, rep->runs,
                                    &rep->cascade_ms, &rep->tuned_ms);
    run->db = NULL;
    tune_db_close(db);
    return st;
}

anvil_status anvil_tune_model(const anvil_model *model, const anvil_tune_options *o,
                              size_t n_inputs, const char *const *input_names,
                              const anvil_tensor *const *inputs, anvil_tune_report **out) {
    API_CHECK(out, "anvil_tune_model: out is NULL");
    *out = NULL;
    API_CHECK(model, "anvil_tune_model: model is NULL");
    API_CHECK(n_inputs == 0 || (input_names && inputs),
              "anvil_tune_model: input_names or inputs is NULL");
    anvil_tune_options defaults;
    anvil_tune_options_default(&defaults);
    if (!o) o = &defaults;
    API_CHECK(o->runs >= 0, "anvil_tune_model: runs is %d; give 0 (skip) or more", o->runs);
    core_err_clear();
    const ir_graph *g = api_model_graph(model);
    const anvil_tensor **bound = core_calloc((size_t)g->n_inputs + 1, sizeof *bound);
    anvil_tune_report *rep = core_calloc(1, sizeof *rep);
    if (!bound || !rep) {
        free(bound);
        free(rep);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    rep->opts = o;
    rep->runs = o->runs;
    rep->model_label = strdup(o->model_label ? o->model_label : "");
    anvil_status st = rep->model_label ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    if (st == ANVIL_OK) st = api_bind_inputs(g, n_inputs, input_names, inputs, bound);
    if (st == ANVIL_OK) st = tune(model, o, bound, rep);
    rep->opts = NULL;
    free(bound);
    *out = rep;
    return st;
}

void anvil_tune_report_free(anvil_tune_report *r) {
    if (!r) return;
    autotune_run_free(&r->run);
    free(r->model_label);
    free(r->text);
    free(r->json);
    free(r);
}

/* ---- the report ---------------------------------------------------------------------------- */

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

static const char *item_status(const autotune_item *it) {
    return !it->settled  ? "unused"
           : it->cached  ? "cached"
           : it->skipped ? "skipped"
           : it->failed  ? "failed"
                         : "tuned";
}

/* The group's chosen choice: the one its record names. */
static int group_choice(const autotune_item *it) {
    for (int k = 0; k < it->n_choices; k++)
        if (!strcmp(it->record.variant, it->choice_names[k])) return k;
    return -1;
}

/* Whether it was measured with bf16 or fp16 candidates and kept an fp32 winner, and why (into why):
 * every such candidate's error exceeded the tolerance, or the fastest that passed was slower. */
static bool fp32_kept(const autotune_item *it, double tolerance, char *why, size_t cap) {
    if (it->winner < 0 || (it->cands[it->winner].v->needs & KERN_ROUNDS_REDUCED)) return false;
    int n_reduced = 0, n_wrong = 0;
    double least_err = INFINITY, best_ns = INFINITY;
    for (int k = 0; k < it->n_cands; k++) {
        const tune_candidate *c = &it->cands[k];
        /* the ones the search checked (it leaves configurations it never reached untimed) */
        if (!(c->v->needs & KERN_ROUNDS_REDUCED) || c->state == TUNE_CAND_UNTIMED ||
            c->state == TUNE_CAND_FAILED)
            continue;
        n_reduced++;
        if (c->max_err < least_err) least_err = c->max_err;
        if (c->state == TUNE_CAND_WRONG)
            n_wrong++;
        else if (c->median_ns > 0 && c->median_ns < best_ns)
            best_ns = c->median_ns;
    }
    if (!n_reduced) {
        for (int k = 0; k < it->n_cands; k++)
            if (it->cands[k].v->needs & KERN_ROUNDS_REDUCED) {
                snprintf(why, cap, "kept in fp32: no bf16 or fp16 candidate was timed");
                return true;
            }
        return false;
    }
    if (n_wrong == n_reduced)
        snprintf(why, cap,
                 "kept in fp32: the reduced-precision error %.1e is above the tolerance %.1e",
                 least_err, tolerance);
    else
        snprintf(why, cap, "kept in fp32: it measured faster than bf16 or fp16 (%.3f ms)",
                 best_ns / 1e6);
    return true;
}

static double item_speedup(const autotune_item *it) {
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

static void count(const autotune_run *r, anvil_tune_summary *s) {
    for (int i = 0; i < r->n_items; i++) {
        const autotune_item *it = &r->items[i];
        s->tuned += it->settled && !it->cached && !it->skipped && !it->failed;
        s->cached += it->cached;
        s->skipped += it->skipped;
        s->failed += it->failed;
        s->changed += it->winner >= 0 && it->winner != it->cascade;
        s->changed +=
            it->group && !it->cached && group_choice(it) >= 0 && group_choice(it) != it->rule;
    }
}

anvil_status anvil_tune_report_summary(const anvil_tune_report *r, anvil_tune_summary *out) {
    API_CHECK(r && out, "anvil_tune_report_summary: report or out is NULL");
    memset(out, 0, sizeof *out);
    out->problems = r->run.n_items;
    count(&r->run, out);
    out->reverted = r->run.reverted;
    out->seconds = r->run.seconds;
    out->cascade_ms = r->cascade_ms;
    out->tuned_ms = r->tuned_ms;
    out->stopped = r->run.stopped;
    out->database = r->db_path;
    out->fingerprint = r->fingerprint;
    return ANVIL_OK;
}

size_t anvil_tune_report_count(const anvil_tune_report *r) {
    return r ? (size_t)r->run.n_items : 0;
}

anvil_status anvil_tune_report_problem(const anvil_tune_report *r, size_t i,
                                       anvil_tune_problem *out) {
    API_CHECK(r && out, "anvil_tune_report_problem: report or out is NULL");
    API_CHECK(i < (size_t)r->run.n_items, "anvil_tune_report_problem: index %zu of %d problems", i,
              r->run.n_items);
    const autotune_item *it = &r->run.items[i];
    const bool has = it->cached || it->winner >= 0 || (it->group && it->record.variant[0]);
    *out = (anvil_tune_problem){.op = it->op,
                                .node = it->node,
                                .key = it->problem.key,
                                .status = item_status(it),
                                .winner = has ? it->record.variant : "",
                                .params = has ? it->record.params : "",
                                .error = it->failed ? it->error : "",
                                .nodes = it->nodes,
                                .candidates = it->n_cands,
                                .raw = it->stats.raw,
                                .median_ms = has ? it->record.median_ns / 1e6 : 0,
                                .speedup = item_speedup(it),
                                .group = it->group,
                                .kept_cascade = it->reverted};
    return ANVIL_OK;
}

static void print_text(FILE *f, const anvil_tune_report *rep, bool verbose) {
    const autotune_run *r = &rep->run;
    const double t_cascade = rep->cascade_ms, t_tuned = rep->tuned_ms;
    anvil_tune_summary sum = {0};
    count(r, &sum);
    int kept_fp32 = 0;
    fprintf(f, "%-4s %-12s %-22s %5s %11s %-46s %10s %8s\n", "#", "op", "first node", "nodes",
            "candidates", "winner", "median", "vs casc.");
    for (int i = 0; i < r->n_items; i++) {
        const autotune_item *it = &r->items[i];
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
        fprintf(f, "%-4d %-12.12s %-22.22s %5d %11s %-46.46s %10s %8s\n", i + 1, it->op, it->node,
                it->nodes, cands, winner, med, sp);
        char why[160];
        if (fp32_kept(it, r->prof.tolerance_bf16, why, sizeof why)) {
            fprintf(f, "       %s\n", why);
            kept_fp32++;
        }
        if (verbose && it->group && !it->cached)
            for (int k = 0; k < it->n_choices; k++)
                fprintf(f, "       %c %-34s whole model %10.3f ms%s\n",
                        !strcmp(it->record.variant, it->choice_names[k]) ? '*' : ' ',
                        it->choice_names[k], it->choice_ms[k], k == it->rule ? "  (rule)" : "");
        if (!verbose || !it->n_cands) continue;
        for (int k = 0; k < it->stats.n_rules; k++)
            fprintf(f, "       rule '%s' removed %d\n", it->stats.rules[k].name,
                    it->stats.rules[k].removed);
        for (int k = 0; k < it->n_cands; k++) {
            const tune_candidate *c = &it->cands[k];
            char params[TUNE_PARAMS_MAX];
            tune_params_format(c->v, &c->cfg, c->threads, params, sizeof params);
            fprintf(f, "       %c %-34s %-28s %-7s %10.3f ms  err %.1e%s\n",
                    k == it->winner ? '*' : ' ', c->v->name, params, state_name(c->state),
                    c->median_ns / 1e6, c->max_err, c->cascade ? "  (cascade)" : "");
        }
    }
    fprintf(f,
            "\nproblems: %d (%d tuned, %d from the database, %d skipped, %d failed); "
            "%d differ from the cascade\n",
            r->n_items, sum.tuned, sum.cached, sum.skipped, sum.failed, sum.changed);
    if (kept_fp32)
        fprintf(f,
                "precision: %d problem(s) kept in fp32 although a bf16 or fp16 variant could run "
                "them\n",
                kept_fp32);
    if (r->reverted)
        fprintf(f,
                "checked in the model: %d problem(s) whose winner ran slower in place than the "
                "cascade keep the cascade ('kept')\n",
                r->reverted);
    if (r->model_cascade_ms > 0)
        fprintf(f, "checked the whole model (alternating): cascade %.3f ms, tuned %.3f ms%s\n",
                r->model_cascade_ms, r->model_tuned_ms,
                r->model_reverted ? "; tuned was slower, so this run's other choices that differ "
                                    "from the cascade went back to it ('kept')"
                                  : "");
    fprintf(f, "tuning time: %.1f s   database: %s\n", r->seconds, rep->db_path);
    if (t_cascade > 0)
        fprintf(f,
                "model latency (median of %d, alternating): cascade %.3f ms, tuned %.3f ms "
                "(%.2fx)\n",
                rep->runs, t_cascade, t_tuned, t_cascade / t_tuned);
    if (r->stopped) fprintf(f, "stopped: rerun the same command to resume\n");
}

static cJSON *item_json(const autotune_item *it) {
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

const char *anvil_tune_report_text(anvil_tune_report *r, int verbose) {
    if (!r) return NULL;
    free(r->text);
    r->text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&r->text, &len);
    if (!f) return NULL;
    print_text(f, r, verbose != 0);
    if (fclose(f) != 0) {
        free(r->text);
        r->text = NULL;
    }
    return r->text;
}

const char *anvil_tune_report_json(anvil_tune_report *r) {
    if (!r) return NULL;
    const autotune_run *run = &r->run;
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "model", r->model_label);
    cJSON_AddStringToObject(root, "database", r->db_path);
    cJSON_AddStringToObject(root, "fingerprint", r->fingerprint);
    cJSON_AddNumberToObject(root, "threads", r->threads);
    cJSON_AddNumberToObject(root, "seconds", run->seconds);
    cJSON_AddBoolToObject(root, "stopped", run->stopped);
    if (r->cascade_ms > 0) {
        cJSON_AddNumberToObject(root, "cascade_ms", r->cascade_ms);
        cJSON_AddNumberToObject(root, "tuned_ms", r->tuned_ms);
    }
    if (run->model_cascade_ms > 0) {
        cJSON *mc = cJSON_AddObjectToObject(root, "model_check");
        cJSON_AddNumberToObject(mc, "cascade_ms", run->model_cascade_ms);
        cJSON_AddNumberToObject(mc, "tuned_ms", run->model_tuned_ms);
        cJSON_AddNumberToObject(mc, "reverted", run->model_reverted);
    }
    cJSON *items = cJSON_AddArrayToObject(root, "problems");
    for (int i = 0; i < run->n_items; i++) cJSON_AddItemToArray(items, item_json(&run->items[i]));
    free(r->json);
    r->json = cJSON_Print(root);
    cJSON_Delete(root);
    return r->json;
}
