/* runtime/session_impl.h: what a session is made of, shared by the files that build and run it
 * (plan.c makes plans, session.c holds sessions and runs them). Private to src/runtime; the layers
 * above read plans and traces through runtime/plan.h. */
#ifndef ANVIL_RUNTIME_SESSION_IMPL_H
#define ANVIL_RUNTIME_SESSION_IMPL_H

#include "runtime/plan.h"
#include "passes/passes.h"

#define RT_MAX_PLANS 8
#define RT_ARENA_ALIGN 64
#define RT_TRACE_MAX_EVENTS (1u << 20)

struct rt_session {
    const ir_graph *g;   /* what runs: the passes' rewrite of src, or src at level 0 */
    const ir_graph *src; /* the model's graph (borrowed) */
    pass_graph *pg;      /* owns g when passes ran */
    /* Nodes the passes must leave unfused: a fused residual matched on symbolic shapes that a
     * plan found to differ (names owned). */
    char **unfused;
    int n_unfused;
    rt_session_config cfg; /* cfg.forces points at `forces` below */
    /* tests only (rt_test_online_keep_all, runtime_test.h): online tuning tries every
     * candidate that passes the check */
    bool online_keep_all;
    rt_force *forces; /* owned copies; strings in force_text */
    char *force_text;
    core_pool *pool;
    op_ctx ctx;
    bool *shape_input;      /* per graph input: its contents decide shapes (plan key) */
    const void **const_ptr; /* per value: aligned constant data */
    void **const_owned;     /* per value: realigned copies owned here */
    rt_plan *plans[RT_MAX_PLANS];
    int n_plans;
    rt_plan *last;
    uint64_t tick;
    size_t plans_made;
    rt_event *events;
    size_t n_events, cap_events, dropped_events;
    uint32_t runs;
    uint64_t t_origin;
    rt_group *groups; /* the measured rewrites' decisions (decide.c) */
    int n_groups, cap_groups;
    /* Per node of g: the index in groups of its training layer's grouped choice
     * (train_groups.c), or -1; NULL when g is not a training graph. Owned. */
    int32_t *layer_group;
    bool own_pool;        /* pool was made here (else borrowed from cfg.pool) */
    struct rt_sub **subs; /* compiled subgraphs, one record per body (subgraph.c) */
    int n_subs;
    size_t sub_runs_compiled, sub_runs_interpreted; /* this session's own, nested excluded */
    /* With profiling: the runs' time, and the parts in reference kernels and in interpreted
     * bodies (this session's own steps; nested sessions keep theirs) */
    uint64_t prof_run_ns, prof_ref_ns, prof_interp_ns;
    char *scope; /* a nested session's place: "<node>.<attribute>[/...]" (owned); NULL: main */
};

/* ---- compiled subgraphs (subgraph.c) ---------------------------------------------------------
 */

typedef struct rt_sub rt_sub;
/* Frees every compiled body of s. */
void rt_subgraphs_free(rt_session *s);
/* Adds the body-run counters and slow-path times of s's nested sessions (at any depth) to out. */
void rt_subgraphs_add_stats(const rt_session *s, anvil_session_stats *out);
/* rt_session_explain's part for s's bodies: the steps of each one's latest compiled plan (its
 * scope set), or one entry saying that it is interpreted and why. */
void rt_subgraphs_explain(const rt_session *s, void (*fn)(void *arg, const rt_step_info *),
                          void *arg);

/* The reduced format step stp's variant, or the one it hands the node to, rounds its operands to:
 * its KERN_ROUNDS_BF16 / KERN_ROUNDS_FP16 bits, 0 for fp32 (plan_regions.c). */
uint32_t rt_step_rounds(const rt_step *stp);

/* ---- plans (plan.c) --------------------------------------------------------------------------
 */

/* Frees p and everything it owns (the variants' states, folded values, arena, workspace). */
void rt_plan_free(rt_plan *p);
/* Checks the caller's inputs against the graph's declared inputs (dtype, rank, known dims). */
anvil_status rt_check_inputs(const rt_session *s, const anvil_tensor *const *inputs);
/* The plan cache key of these inputs: rank and dims of every input, then the contents of the
 * inputs that decide shapes. *out owned by the caller (free). */
anvil_status rt_plan_signature(const rt_session *s, const anvil_tensor *const *inputs,
                               int64_t **out, size_t *len);
/* Marks the graph inputs whose contents decide shapes (s->shape_input). */
anvil_status rt_mark_shape_inputs(rt_session *s);
/* Points s->const_ptr[v] at constant v's bytes, aligned for its dtype. */
anvil_status rt_const_materialize(rt_session *s, ir_vid v);
/* Makes the plan for these inputs (*out owned by the caller, rt_plan_free). *unfuse: the node
 * whose fused epilogue does not fit the concrete shapes (the caller rebuilds the graph without
 * that fusion and tries again), else -1. */
anvil_status rt_plan_make(rt_session *s, const anvil_tensor *const *inputs, rt_plan **out,
                          int32_t *unfuse);

/* The static shapes of a node's inputs or outputs (vals[0..n)) from sh into out; an omitted one
 * is unknown. */
void rt_node_infos(const rt_shapes *sh, const ir_vid *vals, int n, op_tinfo *out);

/* ---- where activations are stored in bf16 (plan_store.c) ------------------------------------ */

/* Places p's activations: a value is stored in bf16 where the step that makes it can write it so
 * and every step that reads it reads it through a port that rounds it to bf16 anyway
 * (kern_variant.bf16_io), so the results are the fp32 plan's bit for bit while those values take
 * half the bytes and no reader converts them again. Sets p->bf16 and the steps' tensor templates,
 * and recomputes the workspace of the steps it touches. Runs after the variants are chosen and
 * before rt_plan_memory; does nothing for sessions that keep fp32 storage
 * (rt_session_config.fp32_storage) or whose plans are emitted (emittable_only). */
anvil_status rt_plan_store(const rt_session *s, rt_plan *p);

/* ---- a plan's memory (plan_memory.c) ------------------------------------------------------ */

/* Liveness, aliasing and in-place reuse, arena offsets, the arena and workspace, the heap values of
 * dynamic steps: everything of p (whose steps are made) that says where values live. */
anvil_status rt_plan_memory(const ir_graph *g, rt_plan *p);

/* ---- measured rewrites (decide.c) --------------------------------------------------------
 */

/* pass_options.decide for s's passes: cfg.decide, then the database, then the rule; records
 * each decision in s->groups. */
int rt_decide(void *s, const pass_decision *q);
/* Forgets the decisions (before the graph is rewritten again). */
void rt_groups_clear(rt_session *s);

/* ---- grouped choices of training graphs (train_groups.c) ---------------------------------
 */

/* Groups each trainable Conv of s->g with its input- and weight-gradient nodes and decides the
 * group (rt_decide), filling s->layer_group. No-op for a graph without anvil.ConvGradW. */
anvil_status rt_train_groups(rt_session *s);
void rt_train_groups_free(rt_session *s);
/* The variant kn's layer group forces under `choice` (-1: the group's decision; oneDNN's pass
 * for "onednn"): true with *out filled. False otherwise, with *anvil_only set when the group chose
 * "anvil" (the node's selection must then set vendor variants aside). */
bool rt_train_group_select(const rt_session *s, const kern_node *kn, int choice, bool *anvil_only,
                           tune_choice *out);
/* The group index of n's layer when its grouped choice is to be tried online (online tuning on,
 * the database silent, more than one choice), else -1. */
int rt_train_group_online(const rt_session *s, const ir_node *n);

/* ---- online grouped choices (online_group.c) -------------------------------------------- */

/* p's online group of this key, or NULL. */
rt_ogroup *rt_ogroup_find(rt_plan *p, const char *key);
/* A new online group in p (owned by p) of the layer group's key and choices. */
anvil_status rt_ogroup_new(rt_plan *p, const char *key, const char *const *choice_names,
                           int n_choices, int rounds, rt_ogroup **out);
/* stp (its alts prepared) becomes a member of og. */
void rt_ogroup_join(rt_ogroup *og, rt_step *stp);
/* The alternative a member step runs this run; its time goes back by rt_ogroup_sample. */
const rt_alt *rt_ogroup_current(const rt_step *stp);
void rt_ogroup_sample(rt_step *stp, uint64_t ns);
/* After a run: the run's samples recorded, the next choice; groups whose rounds are done lock
 * their winner into the member steps and write it to the database. */
anvil_status rt_ogroups_after_run(const rt_session *s, rt_plan *p);
int rt_ogroups_pending(const rt_plan *p);
void rt_ogroups_free(rt_plan *p);
void rt_step_alts_free(rt_step *stp);

/* Whether v is one of the vendor family's variants (oneDNN, OpenBLAS, BLIS). */
bool rt_variant_is_vendor(const kern_variant *v);

/* ---- online tuning: the steps' tuners (online_steps.c; the tuner itself is tune/online.c) --- */

/* At plan time, for a step whose problem the database lacks (p: the plan being made, whose
 * earlier steps' tuners it may join): sets stp->online (or leaves it NULL when there is nothing
 * to choose between) and raises stp->workspace to the largest candidate's. */
anvil_status rt_online_setup(const rt_session *s, const rt_plan *p, const kern_node *kn,
                             rt_step *stp);
/* After a successful run: every tuning step to its next candidate, pruning at round ends, the
 * winners locked into their steps (and written to s->cfg.db when set). */
anvil_status rt_online_after_run(const rt_session *s, rt_plan *p);
/* Steps of p still tuning. */
int rt_online_pending(const rt_plan *p);

#endif
