/* Online tuning (BestOf): a session that tunes while it serves.
 *
 * A step whose problem the database does not have gets every applicable variant at its default
 * parameters, on each thread count, as candidates. Each is checked once at plan time against
 * the cascade's choice on the node's real weights (the cascade is fast, and tested against the
 * reference kernel), so every output the session returns while it tunes is right. Then each run
 * of the session runs the step with the next live candidate and times it there, in the model,
 * with the caches and threads as they really are. After every round (each live candidate run
 * once) past prune_after, candidates slower than the best by more than prune_factor drop out;
 * after `rounds` rounds, or when one is left, the fastest is locked in, the others' prepared
 * states are released and the winner goes to the same database the offline tuner fills.
 *
 * The search is the offline one's first level only (variants x threads, not their parameters):
 * a session cannot afford hundreds of runs per node, and a locked winner's parameters are what
 * `anvil tune` refines later.
 *
 * This file is the tuner of one step, and knows nothing of sessions: the runtime makes one per
 * step at plan time, asks it which candidate to run, hands it each run's time, and after each run
 * advances the leaders, lets every tuner follow its leader and takes the winner out of the ones
 * that locked (runtime/plan.c, session.c). */
#include "tune/tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ONLINE_MAX_SAMPLES 64
/* Candidates whose check run took more than this times the best's are not tried online. */
#define ONLINE_FIRST_CUT 1.5
/* The most candidates a node tries online. */
#define ONLINE_MAX_CANDIDATES 6

struct tune_online {
    tune_problem problem;
    tune_candidate *c; /* [n] */
    int n;
    void **state;       /* [n] prepared states; NULL once dropped */
    bool *fusion_after; /* [n] */
    double *times;      /* [n * ONLINE_MAX_SAMPLES] */
    int current;        /* the candidate this run uses */
    int round;          /* rounds completed */
    int rounds, prune_after;
    double prune_factor;
    /* Steps with the same problem and the same candidates decide together: a member's times
     * go to its leader (pooled, so a model's repeated blocks tune as fast as one), and it
     * follows the leader's cursor, pruning and winner. NULL for a leader. */
    tune_online *leader;
    int lock_at; /* a leader's winner while after_run locks its group; -1 otherwise */
};

static void drop(tune_online *on, int i) {
    if (on->state[i] && on->c[i].v->release) on->c[i].v->release(on->state[i]);
    on->state[i] = NULL;
}

void tune_online_free(tune_online *on) {
    if (!on) return;
    for (int i = 0; i < on->n; i++) drop(on, i);
    free(on->c);
    free(on->state);
    free(on->fusion_after);
    free(on->times);
    free(on);
}

static int alive(const tune_online *on) {
    int k = 0;
    for (int i = 0; i < on->n; i++) k += on->c[i].state == TUNE_CAND_ALIVE;
    return k;
}

/* The next live candidate after i (cyclic); -1 if none. */
static int next_alive(const tune_online *on, int i) {
    for (int k = 1; k <= on->n; k++) {
        int j = (i + k) % on->n;
        if (on->c[j].state == TUNE_CAND_ALIVE) return j;
    }
    return -1;
}

/* Whether a and b are the same candidate: variant, configuration and threads. */
static bool same_candidate(const tune_candidate *a, const tune_candidate *b) {
    return a->v == b->v && a->threads == b->threads && !memcmp(&a->cfg, &b->cfg, sizeof a->cfg);
}

/* Whether a and b offer the same candidates in the same order. */
static bool same_candidates(const tune_online *a, const tune_online *b) {
    if (a->n != b->n || strcmp(a->problem.key, b->problem.key)) return false;
    for (int i = 0; i < a->n; i++)
        if (!same_candidate(&a->c[i], &b->c[i])) return false;
    return true;
}

anvil_status tune_online_setup(const tune_online_opts *o, const kern_node *kn,
                               tune_online *const *peers, int n_peers, tune_online **out,
                               size_t *workspace) {
    *out = NULL;
    tune_problem pr;
    if (tune_problem_of(kn, &pr) != ANVIL_OK) {
        core_err_clear(); /* not tunable: the step keeps its choice */
        return ANVIL_OK;
    }
    tune_candidate *all = NULL;
    int n_all = 0;
    const kern_variant *cascade;
    CORE_TRY(kern_select(kn, NULL, &cascade));
    if (tune_candidates(kn, kn->threads, &all, &n_all, NULL) != ANVIL_OK) {
        core_err_clear();
        return ANVIL_OK;
    }
    tune_online *on = core_calloc(1, sizeof *on);
    anvil_status st = on ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    tune_profiler *chk = NULL;
    tune_profile_opts po = {
        .pool = o->pool, .oracle = cascade, .tolerance_bf16 = o->tolerance_bf16};
    if (st == ANVIL_OK) {
        on->problem = pr;
        on->c = core_calloc((size_t)n_all + 1, sizeof *on->c);
        on->state = core_calloc((size_t)n_all + 1, sizeof *on->state);
        on->fusion_after = core_calloc((size_t)n_all + 1, sizeof *on->fusion_after);
        on->times = core_calloc((size_t)n_all * ONLINE_MAX_SAMPLES + 1, sizeof *on->times);
        if (!on->c || !on->state || !on->fusion_after || !on->times) st = ANVIL_ERR_OUT_OF_MEMORY;
    }
    if (st == ANVIL_OK) st = tune_profiler_create(kn, &po, &chk);
    /* A step with the same problem as an earlier, leading one checks only the candidates that
     * one kept (the others were cut there already): a model's repeated blocks then pay the
     * check runs of all the variants once, not once per block (BERT-base at 2 threads, its 72
     * MatMuls in 4 problems: the session's first run took 23.6 s). */
    const tune_online *lead = NULL;
    for (int j = 0; j < n_peers && !lead; j++)
        if (!peers[j]->leader && !strcmp(peers[j]->problem.key, pr.key)) lead = peers[j];
    /* Candidates at their defaults that pass the check and whose check run took at most twice
     * the cascade's (so that no run while tuning is much slower than an untuned one), prepared
     * for real. A constant may only be let go if every candidate copied it. */
    double cascade_ns = 0, best_ns = 0;
    for (int i = 0; st == ANVIL_OK && i < n_all; i++) {
        all[i].state = TUNE_CAND_UNTIMED;
        if (!kern_config_is_default(&all[i].cfg)) continue;
        bool kept = !lead;
        for (int k = 0; lead && k < lead->n && !kept; k++)
            kept = same_candidate(&all[i], &lead->c[k]);
        if (!kept) continue;
        if ((st = tune_profiler_check(chk, &all[i])) != ANVIL_OK) break;
        if (all[i].cascade) cascade_ns = all[i].median_ns;
        if (all[i].state == TUNE_CAND_ALIVE && (best_ns == 0 || all[i].median_ns < best_ns))
            best_ns = all[i].median_ns;
    }
    /* A step with the same problem as an earlier one joins it (one decision for both) when
     * every candidate of the earlier one passed the check here too; its list, in its order. */
    const tune_online *leader = NULL;
    int *pick = core_calloc((size_t)n_all + 1, sizeof *pick);
    int n_pick = 0;
    if (!pick && st == ANVIL_OK) st = ANVIL_ERR_OUT_OF_MEMORY;
    for (int j = 0; st == ANVIL_OK && j < n_peers && !leader; j++) {
        const tune_online *q = peers[j];
        if (q->leader || strcmp(q->problem.key, pr.key)) continue;
        n_pick = 0;
        for (int k = 0; k < q->n; k++) {
            int found = -1;
            for (int i = 0; i < n_all && found < 0; i++)
                if (all[i].state == TUNE_CAND_ALIVE && same_candidate(&all[i], &q->c[k])) found = i;
            if (found < 0) break;
            pick[n_pick++] = found;
        }
        if (n_pick == q->n) leader = q;
    }
    /* Otherwise its own: the check's warm run is a first, single-sample estimate, enough to
     * leave out what is far behind (more than ONLINE_FIRST_CUT x the best, or twice the
     * cascade) before any real run pays for it, so that round 1 is short and no run while
     * tuning is much slower than an untuned one. */
    if (!leader) {
        double limit = best_ns * ONLINE_FIRST_CUT;
        if (cascade_ns > 0 && 2 * cascade_ns < limit) limit = 2 * cascade_ns;
        if (o->keep_all) limit = 0;
        n_pick = 0;
        for (int i = 0; pick && i < n_all; i++)
            if (all[i].state == TUNE_CAND_ALIVE && !(limit > 0 && all[i].median_ns > limit))
                pick[n_pick++] = i;
        /* At most ONLINE_MAX_CANDIDATES, the fastest by their check run, the cascade always
         * among them: a MatMul's dozen register tiles are all within the cut, and round 1
         * alone would take a run each. */
        if (!o->keep_all && n_pick > ONLINE_MAX_CANDIDATES) {
            for (int q = 1; q < n_pick; q++)
                for (int r = q; r > 0 && all[pick[r]].median_ns < all[pick[r - 1]].median_ns; r--) {
                    int tmp = pick[r];
                    pick[r] = pick[r - 1];
                    pick[r - 1] = tmp;
                }
            bool has_cascade = false;
            for (int q = 0; q < ONLINE_MAX_CANDIDATES; q++) has_cascade |= all[pick[q]].cascade;
            int keep = ONLINE_MAX_CANDIDATES;
            for (int q = keep; q < n_pick && !has_cascade; q++)
                if (all[pick[q]].cascade) {
                    pick[keep - 1] = pick[q];
                    has_cascade = true;
                }
            n_pick = keep;
        }
    }
    uint32_t copied_all = ~0u;
    for (int q = 0; st == ANVIL_OK && q < n_pick; q++) {
        tune_candidate c = all[pick[q]];
        c.median_ns = 0;
        kern_node at = *kn;
        uint32_t copied = 0;
        at.copied = &copied;
        at.threads = c.threads;
        at.config = &c.cfg;
        void *state = NULL;
        if (c.v->prepare && c.v->prepare(&at, &state) != ANVIL_OK) {
            core_err_clear();
            continue;
        }
        size_t ws = c.v->workspace_size ? c.v->workspace_size(&at) : 0;
        if (ws > *workspace) *workspace = ws;
        copied_all &= copied;
        on->fusion_after[on->n] = kern_fusion_pending(c.v, &at);
        on->state[on->n] = state;
        on->c[on->n++] = c;
    }
    tune_profiler_free(chk);
    free(all);
    free(pick);
    if (st != ANVIL_OK || !on || on->n < 2) {
        tune_online_free(on);
        return st; /* nothing to choose between: the step keeps its choice */
    }
    if (kn->copied) *kn->copied = copied_all;
    on->rounds = o->rounds;
    on->prune_after = o->prune_after > 0 ? o->prune_after : 1;
    on->prune_factor = o->prune_factor > 1 ? o->prune_factor : 1.3;
    on->current = 0;
    on->lock_at = -1;
    /* A candidate that failed to prepare here breaks the correspondence: decide alone. */
    if (leader && same_candidates(leader, on)) on->leader = (tune_online *)leader;
    *out = on;
    return ANVIL_OK;
}

void tune_online_current(const tune_online *on, const kern_variant **v, void **state,
                         bool *fusion_after, int *threads) {
    const tune_candidate *c = &on->c[on->current];
    *v = c->v;
    *state = on->state[on->current];
    *fusion_after = on->fusion_after[on->current];
    *threads = c->threads;
}

static void summarize(tune_online *on, int i) {
    tune_candidate *c = &on->c[i];
    int n = c->reps < ONLINE_MAX_SAMPLES ? c->reps : ONLINE_MAX_SAMPLES;
    double s[ONLINE_MAX_SAMPLES];
    memcpy(s, on->times + (size_t)i * ONLINE_MAX_SAMPLES, sizeof(double) * (size_t)n);
    tune_summarize(s, n, &c->median_ns, &c->spread, NULL);
}

void tune_online_sample(tune_online *on, uint64_t ns) {
    tune_online *l = on->leader ? on->leader : on;
    tune_candidate *c = &l->c[on->current];
    if (c->reps < ONLINE_MAX_SAMPLES)
        l->times[(size_t)on->current * ONLINE_MAX_SAMPLES + (size_t)c->reps] = (double)ns;
    c->reps++;
    summarize(l, on->current);
}

/* The fastest live candidate of a leader; the cascade unless beaten by more than 1%. */
static int winner_of(const tune_online *on) {
    int best = -1, cascade = -1;
    for (int i = 0; i < on->n; i++) {
        if (on->c[i].state != TUNE_CAND_ALIVE || !on->c[i].reps) continue;
        if (on->c[i].cascade) cascade = i;
        if (best < 0 || on->c[i].median_ns < on->c[best].median_ns) best = i;
    }
    if (cascade >= 0 && best >= 0 && on->c[cascade].median_ns <= on->c[best].median_ns * 1.01)
        best = cascade;
    return best >= 0 ? best : on->current;
}

void tune_online_take(tune_online *on, int w, tune_choice *choice, void **state,
                      bool *fusion_after) {
    *choice = (tune_choice){.v = on->c[w].v,
                            .cfg = on->c[w].cfg,
                            .threads = on->c[w].threads,
                            .why = TUNE_WHY_ONLINE,
                            .median_ns = on->c[w].median_ns};
    *state = on->state[w];
    on->state[w] = NULL;
    *fusion_after = on->fusion_after[w];
}

bool tune_online_record(const tune_online *on, int w, const char *fingerprint, tune_record *rec) {
    if (on->leader) return false;
    tune_record_of(&on->problem, fingerprint, &on->c[w], "online", rec);
    return true;
}

/* A leader's round logic after a run: next candidate, pruning at round ends, and whether the
 * group locks now (lock_at). */
void tune_online_advance(tune_online *on) {
    if (on->leader) return;
    int nxt = next_alive(on, on->current);
    if (nxt <= on->current) { /* every live candidate has run once more: a round */
        on->round++;
        if (on->round >= on->prune_after) {
            double best = 0;
            for (int k = 0; k < on->n; k++)
                if (on->c[k].state == TUNE_CAND_ALIVE && on->c[k].reps &&
                    (best == 0 || on->c[k].median_ns < best))
                    best = on->c[k].median_ns;
            for (int k = 0; k < on->n; k++) {
                if (on->c[k].state == TUNE_CAND_ALIVE &&
                    on->c[k].median_ns > best * on->prune_factor) {
                    on->c[k].state = TUNE_CAND_SLOW;
                    on->c[k].round = on->round;
                }
            }
        }
        if (on->round >= on->rounds || alive(on) <= 1) {
            on->lock_at = winner_of(on);
            return;
        }
        nxt = next_alive(on, -1);
    }
    if (nxt >= 0) on->current = nxt;
}

int tune_online_follow(tune_online *on) {
    const tune_online *l = on->leader ? on->leader : on;
    on->current = l->current;
    for (int k = 0; k < on->n; k++)
        if (l->c[k].state != TUNE_CAND_ALIVE) drop(on, k);
    return l->lock_at;
}

bool tune_online_is_member(const tune_online *on) {
    return on->leader != NULL;
}
