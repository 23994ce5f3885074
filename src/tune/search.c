/* The staged search over a node's candidates (see tune.h): parents at their defaults first, then
 * each surviving parent's parameters one at a time, then a final side-by-side of the finalists.
 *
 * Coordinate descent can miss a combination that only wins when two parameters change together;
 * the rules already removed the configurations that break the hardware's limits, and what is left
 * is smooth enough in practice (KC, MC, NC and the register tile each mostly trade one cost
 * against another) that one pass finds what the exhaustive search finds at a tenth of the time. */
#include "tune/tune.h"

#include <stdlib.h>
#include <string.h>

/* Profiles c[idx[0..k)] together; results go back into c; *winner is an index into c or -1. */
static anvil_status run_subset(tune_profiler *t, tune_candidate *c, const int *idx, int k,
                               int stage, int *winner) {
    *winner = -1;
    tune_candidate *sub = malloc(sizeof *sub * (size_t)(k > 0 ? k : 1));
    if (!sub) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int j = 0; j < k; j++) sub[j] = c[idx[j]];
    int w = -1;
    anvil_status s = tune_profiler_run(t, sub, k, &w);
    for (int j = 0; j < k && s == ANVIL_OK; j++) {
        c[idx[j]] = sub[j];
        c[idx[j]].stage = stage;
    }
    if (s == ANVIL_OK && w >= 0) *winner = idx[w];
    free(sub);
    return s;
}

static bool same_except(const kern_config *a, const kern_config *b, int p) {
    for (int i = 0; i < KERN_MAX_PARAMS; i++)
        if (i != p && a->v[i] != b->v[i]) return false;
    return true;
}

/* Step 2 for variant v from its best default candidate cur; returns the best index found. */
static anvil_status descend(tune_profiler *t, tune_candidate *c, int n, int *idx, int cur,
                            int *best) {
    const kern_space *sp = c[cur].v->space;
    for (int p = 0; sp && p < sp->n_params && !tune_profiler_expired(t); p++) {
        int k = 0;
        idx[k++] = cur;
        for (int i = 0; i < n; i++) {
            if (i == cur || c[i].v != c[cur].v || c[i].threads != c[cur].threads) continue;
            if (c[i].cfg.v[p] != 0 && same_except(&c[i].cfg, &c[cur].cfg, p)) idx[k++] = i;
        }
        if (k < 2) continue;
        int w;
        CORE_TRY(run_subset(t, c, idx, k, 2, &w));
        if (w >= 0) cur = w;
    }
    *best = cur;
    return ANVIL_OK;
}

anvil_status tune_search(const kern_node *kn, tune_candidate *c, int n, const tune_profile_opts *o,
                         int *winner) {
    *winner = -1;
    tune_profiler *t;
    CORE_TRY(tune_profiler_create(kn, o, &t));
    int *idx = calloc((size_t)n + 1, sizeof *idx);
    int *best = calloc((size_t)n + 1, sizeof *best); /* per candidate's variant: its best */
    if (!idx || !best) {
        free(idx);
        free(best);
        tune_profiler_free(t);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    anvil_status s = ANVIL_OK;
    for (int i = 0; i < n; i++) c[i].state = TUNE_CAND_UNTIMED;

    /* 1. every variant at its defaults, on every thread count */
    int k = 0, w = -1, cascade = -1;
    for (int i = 0; i < n; i++) {
        if (c[i].cascade) cascade = i;
        if (kern_config_is_default(&c[i].cfg)) idx[k++] = i;
    }
    if (s == ANVIL_OK) s = run_subset(t, c, idx, k, 1, &w);

    /* 2. the parameters of each variant still in the race */
    int finalists = 0;
    for (int i = 0; s == ANVIL_OK && i < n; i++) {
        if (c[i].state != TUNE_CAND_ALIVE || !kern_config_is_default(&c[i].cfg) || !c[i].reps)
            continue;
        bool first = true; /* the variant's best default, on its best thread count */
        for (int j = 0; j < n && first; j++)
            if (j != i && c[j].v == c[i].v && c[j].state == TUNE_CAND_ALIVE && c[j].reps &&
                kern_config_is_default(&c[j].cfg) &&
                (c[j].median_ns < c[i].median_ns || (c[j].median_ns == c[i].median_ns && j < i)))
                first = false;
        if (!first) continue;
        int b = i;
        if (c[i].v->space) s = descend(t, c, n, idx, i, &b);
        best[finalists++] = b;
    }

    /* 3. the finalists side by side, with the cascade */
    if (s == ANVIL_OK && finalists > 0) {
        k = 0;
        bool has_cascade = false;
        for (int f = 0; f < finalists; f++) {
            idx[k++] = best[f];
            has_cascade |= best[f] == cascade;
        }
        if (!has_cascade && cascade >= 0) idx[k++] = cascade;
        if (k > 1) s = run_subset(t, c, idx, k, 3, &w);
    }
    if (s == ANVIL_OK) *winner = w;
    free(idx);
    free(best);
    tune_profiler_free(t);
    return s;
}
