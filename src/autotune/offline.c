/* Offline tuning of a whole graph (`anvil tune`).
 *
 * The nodes to tune are found by planning a real session over the graph: after the graph passes,
 * with the concrete shapes of these inputs, exactly the nodes and problems a session will run.
 * The plan calls on_node for each node before choosing its variant; that is where a new problem
 * is measured and its winner written, so the choice right after already reads the new record.
 * Two plans are made: the first only lists the distinct problems (so progress can say i of N
 * and the budget can be spread), the second measures them. */
#include "autotune/autotune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct tune_ctx {
    autotune_run *run;
    bool measure; /* false: the listing plan */
    core_pool *pool;
    int threads;
} tune_ctx;

static int find_item(const autotune_run *r, const char *key) {
    for (int i = 0; i < r->n_items; i++)
        if (!strcmp(r->items[i].problem.key, key)) return i;
    return -1;
}

static anvil_status add_item(autotune_run *r, const kern_node *kn, const tune_problem *pr) {
    if (r->n_items == r->cap_items) {
        int cap = r->cap_items ? r->cap_items * 2 : 8;
        autotune_item *g = realloc(r->items, sizeof *g * (size_t)cap);
        if (!g) return ANVIL_ERR_OUT_OF_MEMORY;
        r->items = g;
        r->cap_items = cap;
    }
    autotune_item *it = &r->items[r->n_items++];
    memset(it, 0, sizeof *it);
    it->problem = *pr;
    snprintf(it->node, sizeof it->node, "%s", kn->node->name);
    it->op = ir_op_name(kn->node->op);
    it->nodes = 1;
    it->winner = it->cascade = -1;
    return ANVIL_OK;
}

/* Whether the tune must stop measuring: interrupted, or past its budget. */
static bool over(const autotune_run *r) {
    return (r->stop && *r->stop) ||
           (r->budget_seconds > 0 && (double)(core_now_ns() - r->t0) / 1e9 >= r->budget_seconds);
}

static void on_round(void *arg, int round, int alive, double best_ns) {
    (void)round;
    tune_ctx *c = arg;
    autotune_run *r = c->run;
    if (r->round) r->round(r->arg, r, r->done, alive, best_ns);
}

/* Measures item i for kn and writes its winner. A failure of this one problem is kept in the
 * item (the cascade then runs it) rather than ending the whole tune. */
static anvil_status measure(tune_ctx *c, int i, const kern_node *kn) {
    autotune_run *r = c->run;
    autotune_item *it = &r->items[i];
    uint64_t t0 = core_now_ns();
    anvil_status s = tune_candidates(kn, c->threads, &it->cands, &it->n_cands, &it->stats);
    tune_profile_opts o = r->prof;
    o.pool = c->pool;
    o.progress = on_round;
    o.progress_arg = c;
    if (r->budget_seconds > 0) {
        /* An even share of what is left for the problems still to come. */
        double left = r->budget_seconds - (double)(core_now_ns() - r->t0) / 1e9;
        int todo = r->n_items - r->done;
        double share = left / (todo > 0 ? todo : 1);
        if (o.max_seconds <= 0 || share < o.max_seconds)
            o.max_seconds = share > 0.05 ? share : 0.05;
    }
    if (s == ANVIL_OK) s = tune_search(kn, it->cands, it->n_cands, &o, &it->winner);
    for (int k = 0; k < it->n_cands; k++)
        if (it->cands[k].cascade) it->cascade = k;
    if (s == ANVIL_OK && it->winner >= 0) {
        tune_record_of(&it->problem, r->fingerprint, &it->cands[it->winner], "offline",
                       &it->record);
        s = tune_db_put(r->db, &it->record);
        if (s != ANVIL_OK) return s; /* the database failing is the whole tune failing */
    }
    if (s != ANVIL_OK || it->winner < 0) {
        it->failed = true;
        snprintf(it->error, sizeof it->error, "%s",
                 s != ANVIL_OK ? core_err_message() : "no candidate passed the reference check");
        core_err_clear();
    }
    it->seconds = (double)(core_now_ns() - t0) / 1e9;
    return ANVIL_OK;
}

static anvil_status on_node(void *arg, const kern_node *kn) {
    tune_ctx *c = arg;
    autotune_run *r = c->run;
    tune_problem pr;
    if (tune_problem_of(kn, &pr) != ANVIL_OK) {
        core_err_clear(); /* not tunable (control flow, unknown shapes): the cascade runs it */
        return ANVIL_OK;
    }
    int i = find_item(r, pr.key);
    if (!c->measure) {
        if (i >= 0) {
            r->items[i].nodes++;
            return ANVIL_OK;
        }
        return add_item(r, kn, &pr);
    }
    if (i < 0) { /* a problem only an alternative rewrite of the graph poses */
        CORE_TRY(add_item(r, kn, &pr));
        i = r->n_items - 1;
    }
    autotune_item *it = &r->items[i];
    if (it->settled) return ANVIL_OK; /* a repeated block */
    bool found = false;
    anvil_status s = ANVIL_OK;
    if (!r->retune) s = tune_db_get(r->db, pr.key, r->fingerprint, &it->record, &found);
    if (s != ANVIL_OK) return s;
    if (found) {
        it->cached = true;
    } else if (over(r)) {
        it->skipped = true;
        r->stopped = r->stop && *r->stop;
    } else if ((s = measure(c, i, kn)) != ANVIL_OK) {
        return s;
    }
    it->settled = true;
    r->done++;
    if (r->progress) r->progress(r->arg, r, i);
    return ANVIL_OK;
}

/* Makes one plan of g with the hook installed (a session that runs once and is freed). */
static anvil_status plan_once(const ir_graph *g, const rt_session_config *cfg,
                              const anvil_tensor *const *inputs, tune_ctx *c) {
    rt_session_config sc = *cfg;
    /* The listing plan reads the database too: its measured rewrites (the layout of a chain)
     * decide which nodes the graph has, and the listing must meet the graph the measuring plan
     * will meet. */
    sc.db = c->run->db;
    sc.fingerprint = c->run->fingerprint;
    sc.on_node = on_node;
    sc.on_node_arg = c;
    sc.profiling = false;
    rt_session *s = NULL;
    anvil_status st = rt_session_create(g, &sc, &s);
    if (st != ANVIL_OK) return st;
    size_t n_out = (size_t)g->n_outputs;
    anvil_tensor **outs = core_calloc(n_out + 1, sizeof *outs);
    bool *want = core_calloc(n_out + 1, sizeof *want);
    if (!outs || !want) st = ANVIL_ERR_OUT_OF_MEMORY;
    if (st == ANVIL_OK) st = rt_session_run(s, inputs, want, outs);
    free(outs);
    free(want);
    rt_session_free(s);
    return st;
}

/* ---- groups of measured rewrites -------------------------------------------------------------
 */

/* A copy, not pointers into run->items: tuning a choice's own problems adds items, and the
 * array moves. */
typedef struct force_ctx {
    const char *rewrite; /* static */
    char group[TUNE_KEY_MAX];
    int choice;
} force_ctx;

static int force_decide(void *arg, const pass_decision *q) {
    const force_ctx *f = arg;
    return !strcmp(q->rewrite, f->rewrite) && !strcmp(q->group, f->group) ? f->choice : -1;
}

/* Times every choice of group item it on the whole model, sessions alternating run by run, and
 * writes the fastest (the rule's unless beaten by more than 1%). Each choice's own node
 * problems are tuned first, so the choices compete at their best. A training layer's grouped
 * choice is timed by its member passes' own time in each run (profiled sessions). */
static anvil_status time_group(tune_ctx *c, const ir_graph *g, const rt_session_config *cfg,
                               const anvil_tensor *const *inputs, int i) {
    autotune_run *r = c->run;
    uint64_t t0 = core_now_ns();
    const int n = r->items[i].n_choices;
    const int runs = r->group_runs > 0 ? r->group_runs : 9;
    const bool train = !strcmp(r->items[i].op, rt_train_conv_rewrite);
    force_ctx f[4];
    rt_session *s[4] = {NULL, NULL, NULL, NULL};
    anvil_status st = ANVIL_OK;
    for (int k = 0; k < n && st == ANVIL_OK; k++) {
        f[k].rewrite = r->items[i].op;
        snprintf(f[k].group, sizeof f[k].group, "%s", r->items[i].group_key);
        f[k].choice = k;
        rt_session_config sc = *cfg;
        sc.decide = force_decide;
        sc.decide_arg = &f[k];
        sc.profiling = train; /* the members' own times (alternate) */
        /* the choice's own problems first (ConvNhwc nodes for "nhwc") */
        st = plan_once(g, &sc, inputs, c);
        sc.db = r->db;
        sc.fingerprint = r->fingerprint;
        sc.on_node = NULL;
        if (st == ANVIL_OK) st = rt_session_create(g, &sc, &s[k]);
    }
    double ms[4] = {0};
    if (st == ANVIL_OK)
        st = autotune_alternate(s, n, inputs, train ? 1 : 2, runs,
                                train ? r->items[i].group_key : NULL, ms);
    autotune_item *it = &r->items[i];
    int best = -1;
    for (int k = 0; k < n && st == ANVIL_OK; k++) {
        it->choice_ms[k] = ms[k];
        if (best < 0 || it->choice_ms[k] < it->choice_ms[best]) best = k;
    }
    if (st == ANVIL_OK && it->choice_ms[it->rule] <= it->choice_ms[best] * 1.01) best = it->rule;
    if (st == ANVIL_OK) {
        tune_record *rec = &it->record;
        memset(rec, 0, sizeof *rec);
        rt_group_key(it->op, it->group_key, cfg->threads, rec->key, sizeof rec->key, rec->family,
                     sizeof rec->family);
        snprintf(rec->fingerprint, sizeof rec->fingerprint, "%s", r->fingerprint);
        snprintf(rec->variant, sizeof rec->variant, "%s", it->choice_names[best]);
        rec->median_ns = it->choice_ms[best] * 1e6;
        rec->reps = runs;
        snprintf(rec->source, sizeof rec->source, "offline");
        rec->unix_time = (int64_t)time(NULL);
        st = tune_db_put(r->db, rec);
    }
    for (int k = 0; k < n; k++) rt_session_free(s[k]);
    it->seconds = (double)(core_now_ns() - t0) / 1e9;
    return st;
}

/* The measured rewrites' groups of g as a session would take them, as items; then each one not
 * in the database is timed. */
/* Whether this run has listed a group of this key already. */
static bool group_listed(const autotune_run *r, const char *key) {
    for (int i = 0; i < r->n_items; i++)
        if (r->items[i].group && !strcmp(r->items[i].group_key, key)) return true;
    return false;
}

/* Adds the groups a session of g takes now (cfg reads the database) that this run has not
 * listed yet; *added: how many. */
static anvil_status list_groups(autotune_run *r, const ir_graph *g, const rt_session_config *cfg,
                                int *added) {
    *added = 0;
    rt_session *s = NULL;
    CORE_TRY(rt_session_create(g, cfg, &s));
    const rt_group *groups;
    int n_groups;
    rt_session_groups(s, &groups, &n_groups);
    anvil_status st = ANVIL_OK;
    for (int k = 0; k < n_groups && st == ANVIL_OK; k++) {
        if (groups[k].n_choices < 2 || groups[k].n_choices > 4 || group_listed(r, groups[k].key))
            continue;
        if (r->n_items == r->cap_items) {
            int cap = r->cap_items ? r->cap_items * 2 : 8;
            autotune_item *gr = realloc(r->items, sizeof *gr * (size_t)cap);
            if (!gr) {
                st = ANVIL_ERR_OUT_OF_MEMORY;
                break;
            }
            r->items = gr;
            r->cap_items = cap;
        }
        autotune_item *it = &r->items[r->n_items++];
        memset(it, 0, sizeof *it);
        it->group = true;
        snprintf(it->group_key, sizeof it->group_key, "%s", groups[k].key);
        it->op = groups[k].rewrite;
        snprintf(it->node, sizeof it->node, "%s", groups[k].first);
        it->nodes = groups[k].n_nodes;
        it->n_choices = groups[k].n_choices;
        it->choice_names = groups[k].choice_names;
        it->rule = groups[k].rule;
        it->winner = it->cascade = -1;
        rt_group_key(groups[k].rewrite, groups[k].key, cfg->threads, it->problem.key,
                     sizeof it->problem.key, it->problem.family, sizeof it->problem.family);
        (*added)++;
    }
    rt_session_free(s);
    return st;
}

/* The groups are listed as a session takes them, and timed. One rewrite's decision can change
 * which nodes another rewrite groups (a back-to-back pair fused changes the layout pass's conv
 * chains), so the listing is made again with the decisions now in the database, and the new
 * groups timed, until no new group appears (a few passes at most). */
static anvil_status tune_groups(tune_ctx *c, const ir_graph *g, const rt_session_config *cfg,
                                const anvil_tensor *const *inputs) {
    autotune_run *r = c->run;
    anvil_status st = ANVIL_OK;
    for (int pass = 0; pass < 4 && st == ANVIL_OK; pass++) {
        const int first = r->n_items;
        int added;
        CORE_TRY(list_groups(r, g, cfg, &added));
        if (added == 0) break;
        const int last = r->n_items; /* time_group adds the items of each choice's problems */
        for (int i = first; i < last && st == ANVIL_OK; i++) {
            if (!r->items[i].group) continue;
            bool found = false;
            if (!r->retune)
                st = tune_db_get(r->db, r->items[i].problem.key, r->fingerprint,
                                 &r->items[i].record, &found);
            if (st != ANVIL_OK) break;
            if (found)
                r->items[i].cached = true;
            else if (over(r))
                r->items[i].skipped = true;
            else
                st = time_group(c, g, cfg, inputs, i);
            r->items[i].settled = true;
            r->done++;
            if (r->progress) r->progress(r->arg, r, i);
        }
    }
    return st;
}

anvil_status autotune_graph(const ir_graph *g, const rt_session_config *cfg,
                            const anvil_tensor *const *inputs, autotune_run *run) {
    run->t0 = core_now_ns();
    run->done = 0;
    tune_ctx c = {.run = run, .threads = cfg->threads > 0 ? cfg->threads : 1};
    anvil_status st = plan_once(g, cfg, inputs, &c);
    if (st != ANVIL_OK) return st;
    if ((st = core_pool_create(c.threads, &c.pool)) != ANVIL_OK) return st;
    c.measure = true;
    st = plan_once(g, cfg, inputs, &c);
    if (st == ANVIL_OK) {
        rt_session_config gc = *cfg;
        gc.db = run->db;
        gc.fingerprint = run->fingerprint;
        st = tune_groups(&c, g, &gc, inputs);
    }
    core_pool_free(c.pool);
    /* Winners already in the database were checked in the model when they were measured: a
     * warm database stays a second's work. */
    bool measured = false;
    for (int i = 0; i < run->n_items; i++)
        measured |= run->items[i].settled && !run->items[i].cached && !run->items[i].skipped;
    if (st == ANVIL_OK && !run->stopped && measured)
        st = autotune_check_in_model(g, cfg, inputs, run);
    run->seconds = (double)(core_now_ns() - run->t0) / 1e9;
    return st;
}

void autotune_run_free(autotune_run *run) {
    for (int i = 0; i < run->n_items; i++) free(run->items[i].cands);
    free(run->items);
    run->items = NULL;
    run->n_items = run->cap_items = 0;
}
