/* Online grouped choices (BestOf, grouped): a training layer's passes (train_groups.c) decided
 * while the model trains, when the database has no decision for the group yet.
 *
 * Every member step holds its variant prepared under each choice (plan.c). Run r of the
 * session runs every member of a group under the same choice, and the members' own time in that
 * run (the sum of their steps) is the choice's sample; the next run takes the next choice. All
 * layers of one key are one group, as they are one decision. After `rounds` rounds the choice
 * with the lowest median wins (the rule's, "tuned", unless beaten by more than 1%), the other
 * choices' states are released, and the decision goes to the database under the same key the
 * offline tuner writes ("rewrite|train_conv|<key>|t=<threads>", source "online"). Outputs stay
 * right while it tries: every choice's variants are checked kernels computing the same pass.
 * The score (rounds, medians, the winner) is tune/race.c's; this file keeps the member steps and
 * their prepared alternatives, and writes the decision. */
#include "session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rt_ogroup {
    char key[TUNE_KEY_MAX];
    const char *const *choice_names; /* static, as the layer group's */
    tune_race *race;                 /* owned: the choices' score (tune/race.c) */
    int n_members;                   /* steps that point here */
};

rt_ogroup *rt_ogroup_find(rt_plan *p, const char *key) {
    for (int i = 0; i < p->n_ogroups; i++)
        if (!strcmp(p->ogroups[i]->key, key)) return p->ogroups[i];
    return NULL;
}

anvil_status rt_ogroup_new(rt_plan *p, const char *key, const char *const *choice_names,
                           int n_choices, int rounds, rt_ogroup **out) {
    rt_ogroup **grown = realloc(p->ogroups, sizeof *grown * (size_t)(p->n_ogroups + 1));
    if (!grown) return ANVIL_ERR_OUT_OF_MEMORY;
    p->ogroups = grown;
    rt_ogroup *og = core_calloc(1, sizeof *og);
    if (!og) return ANVIL_ERR_OUT_OF_MEMORY;
    snprintf(og->key, sizeof og->key, "%s", key);
    og->choice_names = choice_names;
    if (tune_race_new(n_choices, rounds, &og->race) != ANVIL_OK) {
        free(og);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    p->ogroups[p->n_ogroups++] = og;
    *out = og;
    return ANVIL_OK;
}

void rt_ogroup_join(rt_ogroup *og, rt_step *stp) {
    stp->ogroup = og;
    og->n_members++;
}

const rt_alt *rt_ogroup_current(const rt_step *stp) {
    return &stp->alts[tune_race_current(stp->ogroup->race)];
}

void rt_ogroup_sample(rt_step *stp, uint64_t ns) {
    tune_race_sample(stp->ogroup->race, ns);
}

static void alt_release(rt_alt *a) {
    if (a->state && a->v && a->v->release) a->v->release(a->state);
    a->state = NULL;
}

void rt_step_alts_free(rt_step *stp) {
    if (!stp->alts) return;
    for (int c = 0; c < RT_OGROUP_MAX_CHOICES; c++) alt_release(&stp->alts[c]);
    free(stp->alts);
    stp->alts = NULL;
}

static anvil_status put_record(const rt_session *s, const rt_ogroup *og, int w, double ms) {
    if (!s->cfg.db) return ANVIL_OK;
    tune_record rec;
    memset(&rec, 0, sizeof rec);
    rt_group_key(rt_train_conv_rewrite, og->key, s->cfg.threads, rec.key, sizeof rec.key,
                 rec.family, sizeof rec.family);
    snprintf(rec.fingerprint, sizeof rec.fingerprint, "%s", s->cfg.fingerprint);
    snprintf(rec.variant, sizeof rec.variant, "%s", og->choice_names[w]);
    rec.median_ns = ms * 1e6;
    rec.reps = tune_race_rounds(og->race);
    snprintf(rec.source, sizeof rec.source, "online");
    rec.unix_time = (int64_t)time(NULL);
    return tune_db_put(s->cfg.db, &rec);
}

anvil_status rt_ogroups_after_run(const rt_session *s, rt_plan *p) {
    anvil_status st = ANVIL_OK;
    for (int i = 0; i < p->n_ogroups; i++) {
        rt_ogroup *og = p->ogroups[i];
        double ms = 0;
        const int w = tune_race_after_run(og->race, &ms);
        if (w < 0) continue;
        for (int32_t k = 0; k < p->n_steps; k++) {
            rt_step *stp = &p->steps[k];
            if (stp->ogroup != og) continue;
            rt_alt *a = &stp->alts[w];
            stp->variant = a->v;
            stp->state = a->state;
            a->state = NULL;
            stp->config = a->config;
            stp->threads = a->threads;
            stp->fusion_after = a->fusion_after;
            stp->why = TUNE_WHY_ONLINE;
            stp->ogroup = NULL;
            rt_step_alts_free(stp);
        }
        anvil_status ps = put_record(s, og, w, ms);
        if (st == ANVIL_OK) st = ps;
    }
    return st;
}

int rt_ogroups_pending(const rt_plan *p) {
    int k = 0;
    for (int i = 0; i < p->n_ogroups; i++) k += !tune_race_done(p->ogroups[i]->race);
    return k;
}

void rt_ogroups_free(rt_plan *p) {
    for (int i = 0; i < p->n_ogroups; i++) {
        tune_race_free(p->ogroups[i]->race);
        free(p->ogroups[i]);
    }
    free(p->ogroups);
    p->ogroups = NULL;
    p->n_ogroups = 0;
}
