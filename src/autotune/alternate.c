/* Timing sessions against each other. The machines are shared and noisy, so two sessions are
 * never timed one after the other: they take turns run by run and each one's median is kept, so
 * a burst of load falls on all of them alike. */
#include "autotune/autotune.h"
#include "runtime/plan.h"

#include <stdlib.h>
#include <string.h>

/* The milliseconds that the steps of training layer group `key` took in s's trace (a profiled
 * run); the trace is cleared, so the next run's events are the next run's alone. */
static double group_ms(rt_session *s, const char *key) {
    const rt_event *events;
    size_t n;
    rt_session_trace(s, &events, &n);
    uint64_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        const char *k = events[i].node >= 0 ? rt_session_layer_group_key(s, events[i].node) : NULL;
        if (k && !strcmp(k, key)) ns += events[i].t1 - events[i].t0;
    }
    rt_session_trace_clear(s);
    return (double)ns / 1e6;
}

anvil_status autotune_alternate(rt_session *const *s, int n, const anvil_tensor *const *inputs,
                                int warmup, int runs, const char *group_key, double *median_ms) {
    size_t n_out = n > 0 ? (size_t)rt_session_graph(s[0])->n_outputs : 0;
    anvil_tensor **outs = core_calloc(n_out + 1, sizeof *outs);
    bool *want = core_calloc(n_out + 1, sizeof *want); /* all false: no output is copied out */
    double *t = core_calloc((size_t)n * (size_t)runs + 1, sizeof *t);
    anvil_status st = outs && want && t ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < n && st == ANVIL_OK; k++)
        for (int w = 0; w < warmup && st == ANVIL_OK; w++) {
            st = rt_session_run(s[k], inputs, want, outs);
            if (group_key) (void)group_ms(s[k], group_key); /* drops the warm-up's trace */
        }
    for (int j = 0; j < runs && st == ANVIL_OK; j++) {
        for (int k = 0; k < n && st == ANVIL_OK; k++) {
            uint64_t a = core_now_ns();
            st = rt_session_run(s[k], inputs, want, outs);
            t[k * runs + j] =
                group_key ? group_ms(s[k], group_key) : (double)(core_now_ns() - a) / 1e6;
        }
    }
    for (int k = 0; k < n && st == ANVIL_OK && median_ms; k++)
        tune_summarize(t + k * runs, runs, &median_ms[k], NULL, NULL);
    free(t);
    free(outs);
    free(want);
    return st;
}

anvil_status autotune_cascade_vs_db(const ir_graph *g, const rt_session_config *cfg, tune_db *db,
                                    const char *fp, const anvil_tensor *const *inputs, int warmup,
                                    int runs, double *cascade_ms, double *tuned_ms) {
    rt_session_config ca = *cfg, cb = *cfg;
    ca.db = NULL;
    ca.on_node = cb.on_node = NULL;
    ca.profiling = cb.profiling = false;
    cb.db = db;
    cb.fingerprint = fp;
    rt_session *ab[2] = {NULL, NULL};
    double ms[2] = {0, 0};
    anvil_status st = rt_session_create(g, &ca, &ab[0]);
    if (st == ANVIL_OK) st = rt_session_create(g, &cb, &ab[1]);
    if (st == ANVIL_OK) st = autotune_alternate(ab, 2, inputs, warmup, runs, NULL, ms);
    rt_session_free(ab[0]);
    rt_session_free(ab[1]);
    *cascade_ms = ms[0];
    *tuned_ms = ms[1];
    return st;
}
