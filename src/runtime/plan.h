/* runtime/plan.h: a session's plan and profiling trace as plain data, for the layers above the
 * runtime that read them: the emitter (src/emit) writes a plan out as C, the offline tuner
 * (src/autotune) times nodes in place from the trace. Everything here is read-only to them and
 * owned by the session; the session's own state stays in session_impl.h. */
#ifndef ANVIL_RUNTIME_PLAN_H
#define ANVIL_RUNTIME_PLAN_H

#include "runtime/runtime.h"

/* LOC_HEAP: produced by a dynamic step; storage allocated per run, freed after its last reader */
typedef enum { LOC_NONE = 0, LOC_ARENA, LOC_INPUT, LOC_CONST, LOC_HEAP } loc_kind;

typedef struct rt_loc {
    loc_kind kind;
    int32_t input;   /* LOC_INPUT: graph input index */
    size_t offset;   /* LOC_ARENA */
    const void *ptr; /* LOC_CONST */
} rt_loc;

/* One choice of a training layer's grouped choice, prepared for a member step while the online
 * tuner tries the choices (online_group.c). */
typedef struct rt_alt {
    const kern_variant *v;
    kern_config config;
    int threads;
    bool fusion_after;
    void *state; /* owned until the group locks */
} rt_alt;
#define RT_OGROUP_MAX_CHOICES TUNE_RACE_MAX_CHOICES
typedef struct rt_ogroup rt_ogroup;

typedef struct rt_step {
    int32_t node;
    const kern_variant *variant;
    kern_config config;  /* the variant's parameters (all 0: its defaults) */
    int threads;         /* threads the node runs on; 0: all of the session's */
    tune_why why;        /* where the choice came from, for --explain */
    tune_online *online; /* non-NULL while the online tuner is still choosing (tune/online.c) */
    /* While a training layer's grouped choice is tried online (online_group.c): its group
     * (owned by the plan) and this step's variant under each choice [RT_OGROUP_MAX_CHOICES]
     * (owned); NULL otherwise. */
    rt_ogroup *ogroup;
    rt_alt *alts;
    void *state;         /* variant's prepared state */
    size_t workspace;    /* bytes at plan->workspace */
    bool alias;          /* output 0 is input 0's bytes: nothing to run */
    bool dynamic;        /* shapes inferred and outputs allocated while running */
    bool fusion_after;   /* the node's fused epilogue is applied after the variant ran */
    op_tensor *in, *out; /* [n_inputs], [n_outputs] templates; data bound per run */
} rt_step;

typedef struct rt_plan {
    int64_t *sig;
    size_t sig_len;
    rt_shapes shapes; /* owns folded values */
    rt_loc *loc;      /* per value */
    /* Per value: stored in bf16 (plan_store.c); NULL when every activation is fp32. */
    bool *bf16;
    rt_step *steps;
    int32_t n_steps;
    unsigned char *arena;
    size_t arena_bytes, activation_bytes;
    void *workspace;
    size_t workspace_bytes;
    uint64_t last_used;
    bool tuning;         /* some step is still tuning online */
    rt_ogroup **ogroups; /* grouped choices tried online (online_group.c; owned) */
    int n_ogroups;
    /* dynamic steps: the values they produce and the step after which each can go */
    ir_vid *heap_vals;
    int32_t *heap_last;
    int32_t n_heap;
} rt_plan;

typedef struct rt_event {
    int32_t node; /* -1: a whole run */
    uint32_t run;
    uint64_t t0, t1;
    const char *variant;
    const char *runs; /* kern_delegate's variant's name, or NULL */
    tune_why why;     /* where the variant came from; ONLINE while it was being tried */
} rt_event;

/* ---- read access for the layers above --------------------------------------------------------
 * Pointers returned are borrowed from s and valid until s next runs, re-plans or is freed. */

/* The graph s runs: the passes' rewrite of the model's graph, or the graph itself at level 0. */
const ir_graph *rt_session_graph(const rt_session *s);
/* The plan the last run used; NULL before the first run. */
const rt_plan *rt_session_last_plan(const rt_session *s);
/* The configuration s was made with (its forces are s's own copies). */
const rt_session_config *rt_session_config_of(const rt_session *s);
/* Whether graph input i's contents (not only its shape) decide the plan's shapes. */
bool rt_session_input_decides_shapes(const rt_session *s, int32_t i);
/* Whether some node of s runs a body (If/Loop/Scan) that s compiled as a nested session. */
bool rt_session_has_compiled_bodies(const rt_session *s);
/* The events a profiling session recorded since it was made or since rt_session_trace_clear. */
void rt_session_trace(const rt_session *s, const rt_event **events, size_t *n);
void rt_session_trace_clear(rt_session *s);
/* The key of the training layer's grouped choice node k of rt_session_graph(s) belongs to
 * (a rt_group key, borrowed), or NULL. */
const char *rt_session_layer_group_key(const rt_session *s, int32_t k);

#endif
