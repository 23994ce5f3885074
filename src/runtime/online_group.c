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
 * right while it tries: every choice's variants are checked kernels computing the same pass. */
#include "session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OG_MAX_ROUNDS 64

struct rt_ogroup {
    char key[TUNE_KEY_MAX];
    const char *const *choice_names; /* static, as the layer group's */
    int n_choices;
    int current;     /* the choice this run takes */
    int round;       /* rounds completed */
    int rounds;      /* rounds before locking */
    uint64_t acc_ns; /* this run's member time */
    double times[RT_OGROUP_MAX_CHOICES][OG_MAX_ROUNDS];
    int n_members; /* steps that point here */
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
    og->n_choices = n_choices < RT_OGROUP_MAX_CHOICES ? n_choices : RT_OGROUP_MAX_CHOICES;
    og->rounds = rounds < 1 ? 1 : rounds > OG_MAX_ROUNDS ? OG_MAX_ROUNDS : rounds;
    p->ogroups[p->n_ogroups++] = og;
    *out = og;
    return ANVIL_OK;
}

void rt_ogroup_join(rt_ogroup *og, rt_step *stp) {
    stp->ogroup = og;
    og->n_members++;
}

const rt_alt *rt_ogroup_current(const rt_step *stp) {
    return &stp->alts[stp->ogroup->current];
}

void rt_ogroup_sample(rt_step *stp, uint64_t ns) {
    stp->ogroup->acc_ns += ns;
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

static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

static int winner_of(rt_ogroup *og, double *ms) {
    int best = 0;
    for (int c = 0; c < og->n_choices; c++) {
        double tmp[OG_MAX_ROUNDS];
        memcpy(tmp, og->times[c], sizeof(double) * (size_t)og->round);
        ms[c] = median(tmp, og->round) / 1e6;
        if (ms[c] < ms[best]) best = c;
    }
    /* choice 0 is the rule's: it stays unless beaten by more than 1% */
    return ms[0] <= ms[best] * 1.01 ? 0 : best;
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
    rec.reps = og->round;
    snprintf(rec.source, sizeof rec.source, "online");
    rec.unix_time = (int64_t)time(NULL);
    return tune_db_put(s->cfg.db, &rec);
}

anvil_status rt_ogroups_after_run(const rt_session *s, rt_plan *p) {
    anvil_status st = ANVIL_OK;
    for (int i = 0; i < p->n_ogroups; i++) {
        rt_ogroup *og = p->ogroups[i];
        if (og->round >= og->rounds) continue; /* locked */
        og->times[og->current][og->round] = (double)og->acc_ns;
        og->acc_ns = 0;
        if (++og->current < og->n_choices) continue;
        og->current = 0;
        if (++og->round < og->rounds) continue;
        double ms[RT_OGROUP_MAX_CHOICES];
        const int w = winner_of(og, ms);
        og->current = w;
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
        anvil_status ps = put_record(s, og, w, ms[w]);
        if (st == ANVIL_OK) st = ps;
    }
    return st;
}

int rt_ogroups_pending(const rt_plan *p) {
    int k = 0;
    for (int i = 0; i < p->n_ogroups; i++) k += p->ogroups[i]->round < p->ogroups[i]->rounds;
    return k;
}

void rt_ogroups_free(rt_plan *p) {
    for (int i = 0; i < p->n_ogroups; i++) free(p->ogroups[i]);
    free(p->ogroups);
    p->ogroups = NULL;
    p->n_ogroups = 0;
}
