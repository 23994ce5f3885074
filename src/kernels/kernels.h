/* kernels: variants, the interchangeable implementations of an op.
 *
 * Variant 0 of every op is its reference kernel (src/ops): the test oracle, the fallback and the
 * baseline. Faster variants (templated CPU kernels, vendor libraries, CUDA) register in the same
 * table; the plan asks kern_select for one per node, and later the tuner chooses by measuring.
 * Names carry their parameters (e.g. "gemm_f32_14x32_avx512"). */
#ifndef ANVIL_KERNELS_H
#define ANVIL_KERNELS_H

#include "ops/ops.h"

/* ISA / backend requirements, checked against core_hw before `supports`. */
enum {
    KERN_NEEDS_AVX2 = 1u << 0,   /* AVX2 + FMA */
    KERN_NEEDS_AVX512 = 1u << 1, /* AVX-512 F/BW/VL/DQ */
    KERN_NEEDS_AVX512_FP16 = 1u << 2,
    KERN_NEEDS_AVX512_BF16 = 1u << 3,
    KERN_NEEDS_AMX = 1u << 4,
    /* Not a requirement but a property: the variant runs a thread pool of its own beside anvil's
     * (a vendor library's OpenMP). Its idle threads keep spinning after it returns and take the
     * CPUs of the nodes that run next, a cost that timing the variant alone cannot see (on Zen 4,
     * one oneDNN MatMul at the end of ResNet-18 on 2 threads made the whole run 1.6x slower). The
     * tuner offers such variants only to single-threaded sessions. */
    KERN_OWN_THREADS = 1u << 5,
};

/* ---- tunable parameters ---------------------------------------------------------------------
 * A variant may expose template parameters for the tuner to time (GEMM: KC, MC, NC; a GEMM-based
 * convolution: also its register tile). A configuration fixes each parameter; the value 0 means
 * "the variant's own default for this node", so the all-zero configuration is what the variant
 * does untuned, and it is always a candidate. */
#define KERN_MAX_PARAMS 4
typedef struct kern_config {
    int32_t v[KERN_MAX_PARAMS]; /* in the order of the variant's kern_space.names */
} kern_config;

struct kern_node;

/* A hardware rule: a configuration that breaks it is not worth timing (its accumulators do not
 * fit the registers, its A micro-panel does not fit L1, ...). The tuner counts, per rule, the
 * candidates it removed, for its report. */
typedef struct kern_rule {
    const char *name; /* short, for the report: "A panel fits L1" */
    bool (*ok)(const struct kern_node *kn, const core_hw *hw, const kern_config *c);
} kern_rule;

/* A variant's parameter space, as data: the parameters' names and, per node, the values each may
 * take (the cross product is the raw space), then the rules that prune it. */
typedef struct kern_space {
    int n_params; /* 1..KERN_MAX_PARAMS */
    const char *names[KERN_MAX_PARAMS];
    /* Writes the values parameter i may take for kn on hw into vals (at most cap of them, never
     * 0: the default is added by the tuner) and returns how many. */
    int (*values)(const struct kern_node *kn, const core_hw *hw, int i, int32_t *vals, int cap);
    /* Optional: the text of value v of parameter i ("14x32_avx512" for a tile index); NULL or a
     * NULL return: the number. The string is static. */
    const char *(*label)(int i, int32_t v);
    const kern_rule *rules;
    int n_rules;
} kern_space;

/* What a variant sees of a node when it is asked whether it applies and when it prepares: the
 * node, and the static dtypes/shapes of inputs and outputs (with the values of constant inputs,
 * e.g. weights, so prepare can pack them once). */
typedef struct kern_node {
    const ir_node *node;
    const op_tinfo *in;
    int n_in;
    const op_tinfo *out;
    int n_out;
    int threads; /* the session's thread count: workspace_size may reserve a slice per thread */
    /* Optional (may be NULL): prepare sets bit i (kern_node_mark_copied) when its state holds
     * its own copy of constant input i, e.g. packed weights, and run never reads the original;
     * the session then lets the model's mapped pages of that constant go. */
    uint32_t *copied;
    /* Optional (NULL: every parameter at its default): the configuration of the variant's
     * kern_space that workspace_size and prepare must use. Only read during those calls. */
    const kern_config *config;
} kern_node;

/* Whether every parameter of c is at the variant's default (0). */
static inline bool kern_config_is_default(const kern_config *c) {
    for (int i = 0; i < KERN_MAX_PARAMS; i++)
        if (c->v[i]) return false;
    return true;
}

/* Parameter i of kn's configuration, or 0 (the default) when kn has none. */
static inline int32_t kern_param(const kern_node *kn, int i) {
    return kn->config && i >= 0 && i < KERN_MAX_PARAMS ? kn->config->v[i] : 0;
}

static inline void kern_node_mark_copied(const kern_node *kn, int input) {
    if (kn->copied && input >= 0 && input < 32) *kn->copied |= 1u << input;
}

typedef struct kern_variant {
    const char *name;
    ir_op op;
    uint32_t needs; /* KERN_NEEDS_* */
    /* NULL means "every node of op". */
    bool (*supports)(const kern_node *kn, const core_hw *hw);
    /* Scratch bytes the run needs (NULL: none). */
    size_t (*workspace_size)(const kern_node *kn);
    /* Once per plan: e.g. pack constant weights. *state is owned by the variant and released with
     * release(). NULL: no state. */
    anvil_status (*prepare)(const kern_node *kn, void **state);
    void (*release)(void *state);
    /* Computes the node. workspace: workspace_size bytes, 64-byte aligned, or NULL. */
    anvil_status (*run)(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                        op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx);
    /* Whether run applies kn->node->fusion (bias, residual and activation, all of it) itself.
     * NULL or false: the runtime applies it to output 0 after run (kern_fusion_apply). */
    bool (*fuses)(const kern_node *kn);
    /* Its template parameters, for the tuner (NULL: none; the variant is one candidate). */
    const kern_space *space;
} kern_variant;

/* For a variant that only hands its nodes on (conv_f32, the conv family's cascade), the variant
 * that runs the node whose state v prepared (state as v's prepare made it); NULL for every other
 * variant. For --explain and profiles: "conv_f32" alone does not say what ran. */
const kern_variant *kern_delegate(const kern_variant *v, const void *state);

/* Whether the runtime must apply n's fused epilogue after v ran it: n has one and v does not
 * apply it (v->fuses absent or false for kn). */
bool kern_fusion_pending(const kern_variant *v, const kern_node *kn);
/* Checks, with the concrete shapes of kn, that n's fused bias and residual fit its output 0
 * (they were matched on symbolic shapes at load); SHAPE error naming the node otherwise. */
anvil_status kern_fusion_check(const kern_node *kn);
/* Applies n->fusion (see ir_fusion) to out in place: out = act(out + bias + residual), with
 * bias and residual read from in[n->fusion->bias / residual]. fp32 only (passes fuse nothing
 * else). No-op when n has no fusion. */
anvil_status kern_fusion_apply(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *out, op_ctx *ctx);

/* Optimized families. Each exports a NULL-terminated list of its variants (any ops), best first;
 * the registry builds every op's list as: reference, then the families in the order of its
 * cascade table, then each family's own order. That order is the default heuristic: the first
 * variant whose requirements and supports() accept a node runs it. */
extern const kern_variant *const kern_family_gemm[];    /* cpu/gemm: MatMul, Gemm */
extern const kern_variant *const kern_family_conv[];    /* cpu/conv: Conv */
extern const kern_variant *const kern_family_eltwise[]; /* cpu/eltwise: activations, norms, ... */
extern const kern_variant *const kern_family_deconv[];  /* cpu/deconv: ConvTranspose */
extern const kern_variant *const kern_family_rnn[];     /* cpu/rnn: LSTM, GRU, RNN */
extern const kern_variant *const kern_family_data[];    /* cpu/data: Resize, Pad, copies */
extern const kern_variant *const kern_family_math[];    /* cpu/math: Pow, Where, Cast, ... */
extern const kern_variant *const kern_family_reduce[];  /* cpu/reduce: Reduce*, norms, TopK */
extern const kern_variant *const kern_family_chain[];   /* cpu/chain: fused eltwise chains */
extern const kern_variant *const kern_family_attn[];    /* cpu/attn: anvil.Sdpa */
extern const kern_variant *const kern_family_pair[];    /* cpu/pair: anvil.GemmPair, ConvPair */
extern const kern_variant *const kern_family_train[];   /* cpu/train: backward ops */
extern const kern_variant *const kern_family_vendor[];  /* vendor: oneDNN, OpenBLAS, BLIS */

/* Upper bound on the variants of one op (reference included). */
#define KERN_MAX_VARIANTS 48

/* The reference variant of op (variant 0). Never NULL. */
const kern_variant *kern_reference(ir_op op);
/* Every variant registered for op, reference first. *count set; pointer to static data. */
const kern_variant *const *kern_variants(ir_op op, size_t *count);
/* Whether hw has everything a KERN_NEEDS_* mask asks for. */
bool kern_isa_ok(uint32_t needs, const core_hw *hw);
/* Whether a variant can run kn on hw (ISA requirements, then supports()). */
bool kern_applies(const kern_variant *v, const kern_node *kn, const core_hw *hw);
/* Writes "a, b, c": the names of op's variants in preference order, or with kn non-NULL only
 * those that apply to kn on this machine (for error messages). Truncated to cap; returns buf. */
const char *kern_variant_names(ir_op op, const kern_node *kn, char *buf, size_t cap);
/* Looks a variant of op up by name; NULL if op has none of that name. */
const kern_variant *kern_find(ir_op op, const char *name);
/* The default choice for a node: the first applicable variant in the op's preference order
 * (a heuristic cascade; measured selection replaces it later). `forced`, if non-NULL, names the
 * variant that must be used; it is an error (naming node and variant, and listing the variants
 * that do apply) if there is no such variant or it cannot run this node. */
anvil_status kern_select(const kern_node *kn, const char *forced, const kern_variant **out);

#endif
