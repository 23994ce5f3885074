/* A race between a few choices over real runs (BestOf, grouped): run r of a session runs every
 * member of a group under one choice and the members' time in that run is the choice's sample;
 * the next run takes the next choice. After `rounds` rounds the choice with the lowest median
 * wins, choice 0 (the rule's) unless beaten by more than 1%. The runtime keeps which steps race
 * (runtime/online_group.c); this file only keeps the score. */
#include "tune/tune.h"

#include <stdlib.h>
#include <string.h>

#define RACE_MAX_ROUNDS 64

struct tune_race {
    int n_choices;
    int current;     /* the choice this run takes */
    int round;       /* rounds completed */
    int rounds;      /* rounds before the winner is known */
    uint64_t acc_ns; /* this run's member time */
    double times[TUNE_RACE_MAX_CHOICES][RACE_MAX_ROUNDS];
};

anvil_status tune_race_new(int n_choices, int rounds, tune_race **out) {
    tune_race *r = core_calloc(1, sizeof *r);
    if (!r) return ANVIL_ERR_OUT_OF_MEMORY;
    r->n_choices = n_choices < 1                       ? 1
                   : n_choices > TUNE_RACE_MAX_CHOICES ? TUNE_RACE_MAX_CHOICES
                                                       : n_choices;
    r->rounds = rounds < 1 ? 1 : rounds > RACE_MAX_ROUNDS ? RACE_MAX_ROUNDS : rounds;
    *out = r;
    return ANVIL_OK;
}

void tune_race_free(tune_race *r) {
    free(r);
}

int tune_race_current(const tune_race *r) {
    return r->current;
}

void tune_race_sample(tune_race *r, uint64_t ns) {
    r->acc_ns += ns;
}

bool tune_race_done(const tune_race *r) {
    return r->round >= r->rounds;
}

int tune_race_rounds(const tune_race *r) {
    return r->round;
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

static int winner_of(const tune_race *r, double *ms) {
    int best = 0;
    for (int c = 0; c < r->n_choices; c++) {
        double tmp[RACE_MAX_ROUNDS];
        memcpy(tmp, r->times[c], sizeof(double) * (size_t)r->round);
        ms[c] = median(tmp, r->round) / 1e6;
        if (ms[c] < ms[best]) best = c;
    }
    /* choice 0 is the rule's: it stays unless beaten by more than 1% */
    return ms[0] <= ms[best] * 1.01 ? 0 : best;
}

int tune_race_after_run(tune_race *r, double *winner_ms) {
    if (tune_race_done(r)) return -1;
    r->times[r->current][r->round] = (double)r->acc_ns;
    r->acc_ns = 0;
    if (++r->current < r->n_choices) return -1;
    r->current = 0;
    if (++r->round < r->rounds) return -1;
    double ms[TUNE_RACE_MAX_CHOICES];
    const int w = winner_of(r, ms);
    r->current = w;
    *winner_ms = ms[w];
    return w;
}
