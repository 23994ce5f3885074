/* The candidates of a node: variants x their configurations x thread counts, less what the
 * hardware rules reject before anything is timed.
 *
 * The reference kernel is left out whenever a faster variant applies: it is the oracle every
 * candidate is checked against, and timing it (a naive convolution can take a second) would only
 * spend the budget to learn that it loses. The cascade's choice stays in even where a rule would
 * remove it, so a tuned session can never lose the option of doing what an untuned one does. */
#include "tune/tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most values one parameter may offer, and candidates per node: bounds that keep a variant
 * with a careless values() from making the tuner run for hours. */
#define VALUES_CAP 32
#define CANDIDATES_CAP 4096

typedef struct cand_list {
    tune_candidate *c;
    int n, cap;
} cand_list;

static anvil_status push(cand_list *l, const kern_variant *v, const kern_config *cfg, int threads) {
    if (l->n == CANDIDATES_CAP) return ANVIL_OK;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        tune_candidate *g = realloc(l->c, sizeof *g * (size_t)cap);
        if (!g) return ANVIL_ERR_OUT_OF_MEMORY;
        l->c = g;
        l->cap = cap;
    }
    tune_candidate *c = &l->c[l->n++];
    memset(c, 0, sizeof *c);
    c->v = v;
    c->cfg = *cfg;
    c->threads = threads;
    return ANVIL_OK;
}

static void count_rule(tune_space_stats *st, const char *name) {
    if (!st) return;
    for (int i = 0; i < st->n_rules; i++) {
        if (!strcmp(st->rules[i].name, name)) {
            st->rules[i].removed++;
            return;
        }
    }
    if (st->n_rules == TUNE_MAX_RULES) return;
    st->rules[st->n_rules].name = name;
    st->rules[st->n_rules++].removed = 1;
}

/* The first rule of v's space that cfg breaks, or NULL. */
static const char *broken_rule(const kern_variant *v, const kern_node *kn, const core_hw *hw,
                               const kern_config *cfg) {
    const kern_space *sp = v->space;
    for (int r = 0; sp && r < sp->n_rules; r++)
        if (!sp->rules[r].ok(kn, hw, cfg)) return sp->rules[r].name;
    return NULL;
}

/* Every configuration of v's space for kn: the all-default one, then the cross product of the
 * values, each at every thread count in threads[0..nt). */
static anvil_status add_variant(cand_list *l, const kern_variant *v, const kern_node *kn,
                                const core_hw *hw, const int *threads, int nt,
                                tune_space_stats *st) {
    const kern_space *sp = v->space;
    kern_node at = *kn;
    kern_config cfg = {{0}};
    anvil_status s;
    for (int t = 0; t < nt; t++) {
        if (st) st->raw++;
        if ((s = push(l, v, &cfg, threads[t])) != ANVIL_OK) return s;
    }
    if (!sp || sp->n_params < 1 || sp->n_params > KERN_MAX_PARAMS || !sp->values) return ANVIL_OK;
    /* Each parameter's values, with 0 (the variant's own choice) first, so that a search can
     * move one parameter while the others stay at their defaults. */
    int32_t vals[KERN_MAX_PARAMS][VALUES_CAP + 1];
    int nv[KERN_MAX_PARAMS];
    for (int i = 0; i < sp->n_params; i++) {
        vals[i][0] = 0;
        int got = sp->values(kn, hw, i, vals[i] + 1, VALUES_CAP);
        if (got < 0) got = 0;
        if (got > VALUES_CAP) got = VALUES_CAP;
        nv[i] = got + 1;
    }
    int idx[KERN_MAX_PARAMS] = {0};
    for (;;) {
        int i = 0;
        while (i < sp->n_params && ++idx[i] == nv[i]) idx[i++] = 0;
        if (i == sp->n_params) return ANVIL_OK; /* back at all-default: every one visited */
        for (int p = 0; p < sp->n_params; p++) cfg.v[p] = vals[p][idx[p]];
        at.config = &cfg;
        const char *bad = broken_rule(v, &at, hw, &cfg);
        for (int t = 0; t < nt; t++) {
            if (st) st->raw++;
            if (bad) {
                count_rule(st, bad);
                continue;
            }
            if ((s = push(l, v, &cfg, threads[t])) != ANVIL_OK) return s;
        }
    }
}

anvil_status tune_candidates(const kern_node *kn, int max_threads, tune_candidate **out, int *n,
                             tune_space_stats *stats) {
    *out = NULL;
    *n = 0;
    if (stats) memset(stats, 0, sizeof *stats);
    const core_hw *hw = core_hw_get();
    if (max_threads < 1) max_threads = 1;
    /* 1..T threads; past 4, the powers of two and T itself, to keep the count in hand. */
    int threads[32], nt = 0;
    for (int t = max_threads; t >= 1 && nt < 32; t--)
        if (t <= 4 || t == max_threads || (t & (t - 1)) == 0) threads[nt++] = t;
    const kern_variant *cascade = NULL;
    anvil_status s = kern_select(kn, NULL, &cascade);
    if (s != ANVIL_OK) return s;
    size_t nvars = 0;
    const kern_variant *const *vars = kern_variants(kn->node->op, &nvars);
    cand_list l = {0};
    for (size_t i = 1; i < nvars; i++) {
        if (!kern_applies(vars[i], kn, hw)) continue;
        /* see KERN_OWN_THREADS: their cost falls on other nodes, where no timing of theirs
         * sees it */
        if ((vars[i]->needs & KERN_OWN_THREADS) && max_threads > 1 && vars[i] != cascade) continue;
        if ((s = add_variant(&l, vars[i], kn, hw, threads, nt, stats)) != ANVIL_OK) goto fail;
    }
    if (l.n == 0 && (s = add_variant(&l, vars[0], kn, hw, threads, nt, stats)) != ANVIL_OK)
        goto fail;
    bool have_cascade = false;
    for (int i = 0; i < l.n; i++) {
        const tune_candidate *c = &l.c[i];
        if (c->v == cascade && kern_config_is_default(&c->cfg) && c->threads == max_threads) {
            l.c[i].cascade = true;
            have_cascade = true;
        }
    }
    if (!have_cascade) {
        if ((s = push(&l, cascade, &(kern_config){{0}}, max_threads)) != ANVIL_OK) goto fail;
        l.c[l.n - 1].cascade = true;
    }
    if (stats) stats->kept = l.n;
    *out = l.c;
    *n = l.n;
    return ANVIL_OK;
fail:
    free(l.c);
    return s;
}

/* ---- parameter text ---------------------------------------------------------------------------
 */

void tune_params_format(const kern_variant *v, const kern_config *cfg, int threads, char *buf,
                        size_t cap) {
    size_t len = 0;
    if (cap == 0) return;
    buf[0] = '\0';
    const kern_space *sp = v->space;
    for (int i = 0; sp && i < sp->n_params && i < KERN_MAX_PARAMS; i++) {
        if (!cfg->v[i]) continue;
        int w =
            snprintf(buf + len, cap - len, "%s%s=%d", len ? ";" : "", sp->names[i], (int)cfg->v[i]);
        if (w < 0 || (size_t)w >= cap - len) return;
        len += (size_t)w;
    }
    if (threads > 0) snprintf(buf + len, cap - len, "%sthreads=%d", len ? ";" : "", threads);
}

anvil_status tune_params_parse(const kern_variant *v, const char *text, kern_config *cfg,
                               int *threads) {
    memset(cfg, 0, sizeof *cfg);
    *threads = 0;
    const kern_space *sp = v->space;
    const char *p = text;
    while (*p) {
        const char *eq = strchr(p, '=');
        if (!eq)
            return core_err(ANVIL_ERR_INVALID_ARGUMENT, "parameters '%s' of %s: no '=' in '%s'",
                            text, v->name, p);
        size_t nlen = (size_t)(eq - p);
        char *end;
        long val = strtol(eq + 1, &end, 10);
        if (end == eq + 1 || (*end && *end != ';') || val <= 0 || val > (1L << 30))
            return core_err(ANVIL_ERR_INVALID_ARGUMENT, "parameters '%s' of %s: bad value of %.*s",
                            text, v->name, (int)nlen, p);
        bool known = false;
        if (nlen == 7 && !strncmp(p, "threads", 7)) {
            *threads = (int)val;
            known = true;
        }
        for (int i = 0; !known && sp && i < sp->n_params && i < KERN_MAX_PARAMS; i++) {
            if (strlen(sp->names[i]) == nlen && !strncmp(sp->names[i], p, nlen)) {
                cfg->v[i] = (int32_t)val;
                known = true;
            }
        }
        if (!known)
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "parameters '%s': %s has no parameter '%.*s' (a record of another "
                            "build; retune)",
                            text, v->name, (int)nlen, p);
        p = *end ? end + 1 : end;
    }
    return ANVIL_OK;
}
