/* The session's answers to the graph passes' measured rewrites (passes.h, pass_decision): the
 * tuner's forced choice when it is timing one, else what the tuning database holds for this
 * group on this machine and thread count, else the rewrite's own rule. Each answer is kept for
 * --explain and for the tuner, which lists a model's groups this way. */
#include "session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rt_group_key(const char *rewrite, const char *group, int threads, char *key, size_t cap,
                  char *family, size_t family_cap) {
    snprintf(key, cap, "rewrite|%s|%s|t=%d", rewrite, group, threads);
    snprintf(family, family_cap, "rewrite|%s", rewrite);
}

/* The database's choice for q, or -1. A record naming no choice of q is skipped. */
static int from_db(const rt_session *s, const pass_decision *q) {
    char key[TUNE_KEY_MAX], family[TUNE_FAMILY_MAX];
    rt_group_key(q->rewrite, q->group, s->cfg.threads, key, sizeof key, family, sizeof family);
    tune_record rec;
    bool found = false;
    if (tune_db_get(s->cfg.db, key, s->cfg.fingerprint, &rec, &found) != ANVIL_OK) {
        core_err_clear(); /* a read failing costs the measured choice, not the session */
        return -1;
    }
    for (int i = 0; found && i < q->n_choices; i++)
        if (!strcmp(rec.variant, q->choice_names[i])) return i;
    return -1;
}

int rt_decide(void *arg, const pass_decision *q) {
    rt_session *s = arg;
    int ch = -1;
    tune_why why = TUNE_WHY_CASCADE;
    if (s->cfg.decide) {
        ch = s->cfg.decide(s->cfg.decide_arg, q);
        if (ch >= 0 && ch < q->n_choices) why = TUNE_WHY_FORCED;
    }
    if (why == TUNE_WHY_CASCADE && s->cfg.db && (ch = from_db(s, q)) >= 0) why = TUNE_WHY_DB;
    if (why == TUNE_WHY_CASCADE) ch = q->rule;
    if (s->n_groups == s->cap_groups) {
        int cap = s->cap_groups ? s->cap_groups * 2 : 8;
        rt_group *g = realloc(s->groups, sizeof *g * (size_t)cap);
        if (!g) return ch; /* the decision stands; only its record is lost */
        s->groups = g;
        s->cap_groups = cap;
    }
    rt_group *g = &s->groups[s->n_groups++];
    memset(g, 0, sizeof *g);
    g->rewrite = q->rewrite;
    snprintf(g->key, sizeof g->key, "%s", q->group);
    snprintf(g->first, sizeof g->first, "%s", q->first ? q->first : "");
    g->n_nodes = q->n_nodes;
    g->n_choices = q->n_choices;
    g->choice_names = q->choice_names;
    g->rule = q->rule;
    g->chosen = ch;
    g->why = why;
    return ch;
}

void rt_groups_clear(rt_session *s) {
    free(s->groups);
    s->groups = NULL;
    s->n_groups = s->cap_groups = 0;
}

void rt_session_groups(const rt_session *s, const rt_group **groups, int *n) {
    *groups = s->groups;
    *n = s->n_groups;
}
