/* The runtime's side of online tuning (BestOf while a session serves): the plan's steps and their
 * tuners (tune/online.c). At plan time a step the database cannot answer gets a tuner, joining an
 * earlier step's where they pose the same problem; after each run the leaders advance, every
 * tuner follows its leader, and a step whose group locked takes its winner (prepared state and
 * all) and, for the leader, writes it to the database. */
#include "runtime/runtime_test.h"
#include "runtime/session_impl.h"

#include <stdlib.h>

anvil_status rt_online_setup(const rt_session *s, const rt_plan *p, const kern_node *kn,
                             rt_step *stp) {
    tune_online **peers = core_calloc((size_t)p->n_steps + 1, sizeof *peers);
    if (!peers) return ANVIL_ERR_OUT_OF_MEMORY;
    int n_peers = 0;
    for (int32_t j = 0; j < p->n_steps; j++)
        if (p->steps[j].online) peers[n_peers++] = p->steps[j].online;
    const tune_online_opts o = {
        .pool = s->pool,
        .rounds = s->cfg.online_rounds,
        .prune_after = s->cfg.online_prune_after,
        .prune_factor = s->cfg.online_prune_factor,
        .keep_all = s->online_keep_all,
        /* precision auto: bf16 only within the session's tolerance */
        .tolerance_bf16 = s->cfg.knobs.precision == KERN_PREC_AUTO ? s->cfg.tolerance : 0};
    anvil_status st = tune_online_setup(&o, kn, peers, n_peers, &stp->online, &stp->workspace);
    free(peers);
    if (st == ANVIL_OK && stp->online) stp->why = TUNE_WHY_ONLINE;
    return st;
}

/* Locks candidate w of stp's tuner into stp; the leader writes the group's record. */
static anvil_status lock(const rt_session *s, rt_step *stp, int w) {
    tune_choice ch;
    tune_online_take(stp->online, w, &ch, &stp->state, &stp->fusion_after);
    stp->variant = ch.v;
    stp->config = ch.cfg;
    stp->threads = ch.threads;
    tune_record rec;
    if (!s->cfg.db || !tune_online_record(stp->online, w, s->cfg.fingerprint, &rec))
        return ANVIL_OK;
    return tune_db_put(s->cfg.db, &rec);
}

anvil_status rt_online_after_run(const rt_session *s, rt_plan *p) {
    anvil_status st = ANVIL_OK;
    for (int32_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].online) tune_online_advance(p->steps[i].online);
    /* Members follow their leader: its cursor, its pruning, its winner. Members go first, so a
     * leader that locks has no member left pointing at it when it is freed. */
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = 0; i < p->n_steps; i++) {
            rt_step *stp = &p->steps[i];
            tune_online *on = stp->online;
            if (!on || (pass == 0) != tune_online_is_member(on)) continue;
            const int w = tune_online_follow(on);
            if (w < 0) continue;
            anvil_status ls = lock(s, stp, w);
            if (st == ANVIL_OK) st = ls;
            tune_online_free(on);
            stp->online = NULL;
        }
    }
    return st;
}

int rt_online_pending(const rt_plan *p) {
    int k = 0;
    for (int32_t i = 0; i < p->n_steps; i++) k += p->steps[i].online != NULL;
    return k;
}

void rt_test_online_keep_all(rt_session *s, bool on) {
    s->online_keep_all = on;
}
