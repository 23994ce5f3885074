/* The last step of `anvil tune`: every winner checked where it will run, inside the model.
 *
 * A node timed alone runs with its weights hot in the caches, run after run; inside a model each
 * layer's weights arrive cold behind the previous layer's, and a blocking that wins hot can lose
 * cold (GPT-2's MatMuls on 2 threads: a narrow B block measured faster alone made the model 13%
 * slower). So the model runs with the cascade and tuned, alternating, with per-node timings, and
 * a problem whose tuned nodes take longer in place than the cascade's do (summed over the nodes
 * that share it, past noise) gets the cascade's choice written back as its record.
 *
 * Then the whole model, once more: small losses below the per-problem margin, and choices that
 * no node's timing shows (a layout decision moves transposes between nodes), can still add up to
 * a slower model. If the tuned model is slower than the cascade's past MODEL_MARGIN, every
 * choice this run made that differs from the cascade goes back to the cascade's: a tune never
 * leaves a model slower than it found it. */
#include "autotune/autotune.h"
#include "runtime/plan.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VERIFY_ROUNDS 7
/* Slower in place by more than this fraction, and by more than VERIFY_MIN_NS in total, counts. */
#define VERIFY_MARGIN 0.05
#define VERIFY_MIN_NS 2000.0
/* The whole-model check: rounds alternating, and how much slower tuned may be before it counts
 * (autotune_run.model_margin overrides it). */
#define MODEL_ROUNDS 9
#define MODEL_MARGIN 0.02

/* Node name -> problem key of the tuned session's nodes, filled by its plan's on_node hook. */
typedef struct key_map {
    char **name, **key;
    int n, cap;
    bool oom;
} key_map;

static anvil_status record_key(void *arg, const kern_node *kn) {
    key_map *m = arg;
    tune_problem pr;
    if (tune_problem_of(kn, &pr) != ANVIL_OK) {
        core_err_clear();
        return ANVIL_OK;
    }
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 64;
        char **a = realloc(m->name, sizeof *a * (size_t)cap), **b;
        if (a) m->name = a;
        b = realloc(m->key, sizeof *b * (size_t)cap);
        if (b) m->key = b;
        if (!a || !b) return ANVIL_ERR_OUT_OF_MEMORY;
        m->cap = cap;
    }
    m->name[m->n] = strdup(kn->node->name);
    m->key[m->n] = strdup(pr.key);
    if (!m->name[m->n] || !m->key[m->n]) {
        free(m->name[m->n]);
        free(m->key[m->n]);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    m->n++;
    return ANVIL_OK;
}

static void key_map_free(key_map *m) {
    for (int i = 0; i < m->n; i++) {
        free(m->name[i]);
        free(m->key[i]);
    }
    free(m->name);
    free(m->key);
}

/* Per node of s's graph: the median of its durations over the runs from `from_run` on; 0 for
 * nodes that never ran. out has g->n_nodes entries. The events are grouped by node in one pass
 * (counted, then placed), not scanned once per node. */
static anvil_status node_medians(const rt_session *s, uint32_t from_run, double *out) {
    const int32_t nn = rt_session_graph(s)->n_nodes;
    const rt_event *events;
    size_t n_events;
    rt_session_trace(s, &events, &n_events);
    double *buf = core_calloc(n_events + 1, sizeof *buf);
    size_t *start = core_calloc((size_t)nn + 2, sizeof *start);
    if (!buf || !start) {
        free(buf);
        free(start);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (size_t e = 0; e < n_events; e++) {
        const rt_event *ev = &events[e];
        if (ev->node >= 0 && ev->node < nn && ev->run >= from_run) start[ev->node + 2]++;
    }
    for (int32_t k = 0; k < nn; k++) start[k + 2] += start[k + 1];
    /* start[k + 1] is now node k's first slot; it advances while filling */
    for (size_t e = 0; e < n_events; e++) {
        const rt_event *ev = &events[e];
        if (ev->node >= 0 && ev->node < nn && ev->run >= from_run)
            buf[start[ev->node + 1]++] = (double)(ev->t1 - ev->t0);
    }
    for (int32_t k = 0; k < nn; k++)
        tune_summarize(buf + start[k], (int)(start[k + 1] - start[k]), &out[k], NULL, NULL);
    free(buf);
    free(start);
    return ANVIL_OK;
}

static int32_t node_named(const ir_graph *g, const char *name) {
    for (int32_t k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].name && !strcmp(g->nodes[k].name, name)) return k;
    return -1;
}

/* The step of s's last plan that runs node k, or NULL. */
static const rt_step *step_of(const rt_session *s, int32_t k) {
    const rt_plan *p = rt_session_last_plan(s);
    for (int32_t i = 0; p && i < p->n_steps; i++)
        if (p->steps[i].node == k) return &p->steps[i];
    return NULL;
}

/* Item it's record set back to the cascade's choice and written; false if it has none to go back
 * to (cached or skipped items, failed ones, those already at the cascade's). */
static anvil_status back_to_cascade(autotune_run *run, autotune_item *it, bool *changed) {
    *changed = false;
    if (it->cached || it->skipped || it->failed || it->reverted) return ANVIL_OK;
    tune_record rec = it->record;
    if (it->group) {
        if (it->rule < 0 || it->rule >= it->n_choices ||
            !strcmp(rec.variant, it->choice_names[it->rule]))
            return ANVIL_OK;
        snprintf(rec.variant, sizeof rec.variant, "%s", it->choice_names[it->rule]);
        rec.median_ns = it->choice_ms[it->rule] * 1e6;
    } else {
        if (it->cascade < 0 || it->winner < 0 || it->winner == it->cascade) return ANVIL_OK;
        tune_record_of(&it->problem, run->fingerprint, &it->cands[it->cascade], "offline", &rec);
    }
    rec.unix_time = (int64_t)time(NULL);
    CORE_TRY(tune_db_put(run->db, &rec));
    it->record = rec;
    it->reverted = true;
    *changed = true;
    return ANVIL_OK;
}

static anvil_status model_check(const ir_graph *g, const rt_session_config *cfg,
                                const anvil_tensor *const *inputs, autotune_run *run) {
    CORE_TRY(autotune_cascade_vs_db(g, cfg, run->db, run->fingerprint, inputs, 2, MODEL_ROUNDS,
                                    &run->model_cascade_ms, &run->model_tuned_ms));
    const double margin = run->model_margin != 0 ? run->model_margin : MODEL_MARGIN;
    if (!(run->model_tuned_ms > run->model_cascade_ms * (1 + margin))) return ANVIL_OK;
    for (int i = 0; i < run->n_items; i++) {
        bool changed;
        CORE_TRY(back_to_cascade(run, &run->items[i], &changed));
        run->model_reverted += changed;
    }
    return ANVIL_OK;
}

anvil_status autotune_check_in_model(const ir_graph *g, const rt_session_config *cfg,
                                     const anvil_tensor *const *inputs, autotune_run *run) {
    key_map map = {0};
    rt_session_config ca = *cfg, cb = *cfg;
    ca.db = NULL;
    ca.profiling = cb.profiling = true;
    ca.on_node = NULL;
    cb.db = run->db;
    cb.fingerprint = run->fingerprint;
    cb.on_node = record_key;
    cb.on_node_arg = &map;
    rt_session *ab[2] = {NULL, NULL};
    double *ma = NULL, *mb = NULL;
    anvil_status st = rt_session_create(g, &ca, &ab[0]);
    if (st == ANVIL_OK) st = rt_session_create(g, &cb, &ab[1]);
    rt_session *a = ab[0], *b = ab[1];
    const ir_graph *ga = a ? rt_session_graph(a) : NULL, *gb = b ? rt_session_graph(b) : NULL;
    /* two warm-up runs each (the first makes the plan; node_medians skips both), then rounds
     * alternating */
    if (st == ANVIL_OK) st = autotune_alternate(ab, 2, inputs, 2, VERIFY_ROUNDS, NULL, NULL);
    if (st == ANVIL_OK) {
        ma = core_calloc((size_t)ga->n_nodes + 1, sizeof *ma);
        mb = core_calloc((size_t)gb->n_nodes + 1, sizeof *mb);
        if (!ma || !mb) st = ANVIL_ERR_OUT_OF_MEMORY;
    }
    if (st == ANVIL_OK) st = node_medians(a, 2, ma);
    if (st == ANVIL_OK) st = node_medians(b, 2, mb);
    /* Per problem: the tuned nodes' time in place against the same nodes' under the cascade. */
    bool *done = core_calloc((size_t)map.n + 1, sizeof *done);
    if (st == ANVIL_OK && !done) st = ANVIL_ERR_OUT_OF_MEMORY;
    for (int i = 0; st == ANVIL_OK && i < map.n; i++) {
        if (done[i]) continue;
        double tuned = 0, cascade = 0;
        const rt_step *cstep = NULL;
        bool from_db = false;
        for (int j = i; j < map.n; j++) {
            if (strcmp(map.key[j], map.key[i])) continue;
            done[j] = true;
            int32_t kb = node_named(gb, map.name[j]), ka = node_named(ga, map.name[j]);
            const rt_step *sb = kb >= 0 ? step_of(b, kb) : NULL;
            const rt_step *sa = ka >= 0 ? step_of(a, ka) : NULL;
            if (!sb || !sa || sb->dynamic || sa->dynamic || ga->nodes[ka].op != gb->nodes[kb].op)
                continue;
            from_db |= sb->why == TUNE_WHY_DB;
            tuned += mb[kb];
            cascade += ma[ka];
            if (!cstep) cstep = sa;
        }
        if (!from_db || !cstep || cascade <= 0) continue;
        if (tuned <= cascade * (1 + VERIFY_MARGIN) || tuned - cascade <= VERIFY_MIN_NS) continue;
        tune_record rec;
        bool found = false;
        st = tune_db_get(run->db, map.key[i], run->fingerprint, &rec, &found);
        if (st != ANVIL_OK || !found) continue;
        snprintf(rec.variant, sizeof rec.variant, "%s", cstep->variant->name);
        rec.params[0] = '\0';
        rec.median_ns = cascade;
        rec.spread = 1;
        rec.reps = VERIFY_ROUNDS;
        rec.max_err = 0;
        rec.unix_time = (int64_t)time(NULL);
        if ((st = tune_db_put(run->db, &rec)) != ANVIL_OK) break;
        run->reverted++;
        for (int k = 0; k < run->n_items; k++) {
            if (strcmp(run->items[k].problem.key, map.key[i])) continue;
            run->items[k].reverted = true;
            run->items[k].in_model_tuned_ns = tuned;
            run->items[k].in_model_cascade_ns = cascade;
            run->items[k].record = rec;
        }
    }
    free(done);
    free(ma);
    free(mb);
    rt_session_free(a);
    rt_session_free(b);
    key_map_free(&map);
    if (st == ANVIL_OK) st = model_check(g, cfg, inputs, run);
    return st;
}
