/* autotune: the drivers of measured selection that sit above the runtime. They make sessions,
 * run them and read their plans and traces (runtime/plan.h), and write what they measure to the
 * tuning database (src/tune). offline.c is `anvil tune` (every distinct problem of a graph, then
 * the measured rewrites' groups), in_model.c checks the winners inside the model, alternate.c
 * times sessions against each other. The online tuner (BestOf while a session serves) is not a
 * driver of sessions but runs inside them: its tuners are tune/online.c and tune/race.c, the
 * runtime's side of them runtime/online_steps.c and online_group.c. */
#ifndef ANVIL_AUTOTUNE_H
#define ANVIL_AUTOTUNE_H

#include "runtime/runtime.h"

/* ---- offline tuning (offline.c) ----------------------------------------------------------------
 * Tunes every distinct problem of a graph for the given inputs' shapes: the nodes are found by
 * planning a session (so they are the nodes it will really run, after the graph passes), each new
 * problem's candidates are profiled and the winner is written to the database at once, so an
 * interrupted tune keeps everything measured so far and a rerun resumes where it stopped. */

/* One distinct problem. */
typedef struct autotune_item {
    tune_problem problem;
    char node[128]; /* the first node that poses it */
    const char *op; /* its ONNX op type (static) */
    int nodes;      /* nodes sharing the problem */
    bool cached;    /* already in the database: not measured again */
    bool skipped;   /* not measured: the budget ran out or the tune was stopped */
    bool failed;    /* measuring it failed (message in error) */
    char error[256];
    tune_space_stats stats;
    tune_candidate *cands; /* [n_cands], owned by the run (NULL for cached/skipped) */
    int n_cands;
    int winner, cascade; /* indices into cands, -1 if none */
    tune_record record;  /* what the database now holds for it (cached or new) */
    double seconds;      /* spent measuring it */
    bool settled;        /* measured, cached or skipped */
    /* A measured rewrite's group (pass_decision) instead of a node's problem: each choice timed
     * on the whole model (its transposes and the other nodes' reaction included). op is the
     * rewrite's name, node the group's first node, nodes its size. */
    bool group;
    char group_key[TUNE_KEY_MAX]; /* pass_decision.group */
    int n_choices, rule;
    const char *const *choice_names; /* static */
    double choice_ms[4];             /* whole-model median per choice; 0 if not timed */
    /* Checked in the model (verify.c): its winner took longer in place than the cascade, which
     * is now its record; the two in-place times, summed over its nodes. */
    bool reverted;
    double in_model_tuned_ns, in_model_cascade_ns;
} autotune_item;

typedef struct autotune_run {
    /* in */
    tune_db *db;             /* borrowed */
    const char *fingerprint; /* borrowed */
    bool retune;             /* measure problems the database already has, too */
    double budget_seconds;   /* whole run; <= 0: no limit */
    tune_profile_opts prof;  /* pool is set by autotune_graph */
    volatile int *stop;      /* optional: set (e.g. by SIGINT) to stop after the current problem */
    /* How much slower the tuned model may be than the cascade's before this run's choices go
     * back to the cascade's (verify.c); 0: the default, 2%. -1 makes any tuned model count as
     * slower (tests). */
    double model_margin;
    /* Optional: after each problem is settled (measured, cached or skipped). */
    void (*progress)(void *arg, const struct autotune_run *run, int item);
    /* Optional: during a problem's rounds (item i of n_items, live candidates, best so far). */
    void (*round)(void *arg, const struct autotune_run *run, int item, int alive, double best_ns);
    void *arg;
    /* out */
    autotune_item *items; /* [n_items] in the order the plan meets them */
    int n_items, cap_items;
    int done;       /* items settled so far */
    int group_runs; /* timed runs per choice of a group (0: 9) */
    uint64_t t0;
    double seconds; /* the whole tune, set when autotune_graph returns */
    int reverted;   /* problems whose winner lost to the cascade inside the model */
    /* The whole model checked last (verify.c), after those reverts: its median latency with the
     * cascade and with the tuned choices (0: not checked); and, where tuned was still slower,
     * how many further choices of this run went back to the cascade's. */
    double model_cascade_ms, model_tuned_ms;
    int model_reverted;
    bool stopped;
} autotune_run;

/* ---- timing sessions against each other (alternate.c) ------------------------------------------
 */

/* Runs sessions s[0..n) on the same inputs: `warmup` untimed runs each, then `runs` rounds in
 * which each runs once in turn, so the machine's noise falls on all alike. median_ms (may be
 * NULL): per session, the median of its timed runs in milliseconds: of the whole run, or with
 * group_key (profiled sessions of a training graph) of the time the steps of that training
 * layer's grouped choice took in the run. */
anvil_status autotune_alternate(rt_session *const *s, int n, const anvil_tensor *const *inputs,
                                int warmup, int runs, const char *group_key, double *median_ms);

/* g's median latency in ms with the cascade (no database) and with db (fingerprint fp), its two
 * sessions run alternating (autotune_alternate: warmup, runs); cfg as for a session, its
 * database, node hook and profiling ignored. */
anvil_status autotune_cascade_vs_db(const ir_graph *g, const rt_session_config *cfg, tune_db *db,
                                    const char *fp, const anvil_tensor *const *inputs, int warmup,
                                    int runs, double *cascade_ms, double *tuned_ms);

/* ---- offline tuning, the driver (offline.c)
 * ------------------------------------------------------ */

/* Tunes g (cfg as for a session: threads, opt level, layout; cfg->db is ignored) for inputs.
 * run->items is filled even on failure; free with autotune_run_free. */
anvil_status autotune_graph(const ir_graph *g, const rt_session_config *cfg,
                            const anvil_tensor *const *inputs, autotune_run *run);
void autotune_run_free(autotune_run *run);

/* ---- checking tuned winners inside the model (in_model.c) --------------------------------------
 */

/* Runs g with the cascade and with run->db alternating, timing every node in place, and writes
 * the cascade's choice back for each problem whose tuned nodes were slower there; then the whole
 * model once more (run->model_*). */
anvil_status autotune_check_in_model(const ir_graph *g, const rt_session_config *cfg,
                                     const anvil_tensor *const *inputs, autotune_run *run);

#endif
