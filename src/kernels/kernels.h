/* kernels: variants, the interchangeable implementations of an op.
 *
 * Variant 0 of every op is its reference kernel (src/ops): the test oracle, the fallback and the
 * baseline. Faster variants (templated CPU kernels, vendor libraries, CUDA) register in the same
 * table; the plan asks kern_select for one per node, and later the tuner chooses by measuring.
 * Names carry their parameters (e.g. "gemm_f32_14x32_avx512"). */
#ifndef ANVIL_KERNELS_H
#define ANVIL_KERNELS_H

#include "ops/ops.h"

#include "kernels/kern_isa.h"

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

/* ---- knobs -----------------------------------------------------------------------------------
 * Settings for experiments and comparisons that override a variant's own choice for every node
 * of a session (rt_session_config.knobs). The API fills them from its options and the ANVIL_*
 * variables (src/api/env.c, which lists them); kernels never read the environment. All zero is
 * every variant's own choice. */
#define KERN_KNOB_NAME 32

/* The arithmetic a session accepts (kern_knobs.precision). FP32 runs only variants that compute
 * in fp32; BF16 also offers the variants that round their operands to bf16 and accumulate in fp32
 * (KERN_ROUNDS_BF16), and puts them first; AUTO offers them too, and the tuner keeps them only
 * where they measure faster and the session's error tolerance holds (tune/, api/). FP16 offers
 * and puts first the variants that round to IEEE half instead (KERN_ROUNDS_FP16, the AVX512-FP16
 * GEMM tiles), and never a bf16 one: each reduced format only where the session named it, or
 * both under AUTO. */
typedef enum kern_precision {
    KERN_PREC_F32 = 0,
    KERN_PREC_BF16 = 1,
    KERN_PREC_FP16 = 2,
    KERN_PREC_AUTO = 3,
    /* int8: MatMuls with a constant B quantized dynamically (KERN_ROUNDS_INT8) */
    KERN_PREC_INT8 = 4,
} kern_precision;

typedef struct kern_knobs {
    /* > 0: the GEMM cache blocks (KC, MC and NC rounded to the tile) of every GEMM-based
     * variant, where the tuner's configuration leaves them (ANVIL_GEMM_KC/MC/NC) */
    int32_t gemm_kc, gemm_mc, gemm_nc;
    /* Winograd's GEMM: 0 the rule, 1 tiles as its rows, 2 as its columns (ANVIL_WINO_ROWS) */
    int wino_rows;
    /* the GEMM-based convs' register tile by kernel name ("8x32_avx512"; ANVIL_CONV_TILE) and
     * ConvTranspose's (ANVIL_DECONV_TILE); "": the variant's choice */
    char conv_tile[KERN_KNOB_NAME];
    char deconv_tile[KERN_KNOB_NAME];
    /* the NHWC GEMM conv always copies its input (im2col) instead of indirect A rows
     * (ANVIL_CONV_IM2COL) */
    bool conv_im2col;
    /* What the session accepts of reduced-precision arithmetic (kern_precision; 0: fp32 only).
     * Not an experiment: kern_applies refuses a KERN_ROUNDS_BF16 (FP16) variant where this is
     * neither BF16 (FP16) nor AUTO, and
     * the tuning key records anything else (tune/key.c). */
    int precision;
} kern_knobs;

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
    /* Optional (NULL: all zero): the session's knobs (borrowed; read by workspace_size, prepare
     * and supports). */
    const kern_knobs *knobs;
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

/* Whether input i of kn exists (was given and not omitted). */
static inline bool kern_has_input(const kern_node *kn, int i) {
    return i < kn->n_in && i < kn->node->n_inputs && kn->node->inputs[i] != IR_NONE;
}

/* Whether output i of kn exists. */
static inline bool kern_has_output(const kern_node *kn, int i) {
    return i < kn->n_out && i < kn->node->n_outputs && kn->node->outputs[i] != IR_NONE;
}

/* kn's knobs; all zero where it has none. */
static inline const kern_knobs *kern_knobs_of(const kern_node *kn) {
    static const kern_knobs none;
    return kn && kn->knobs ? kn->knobs : &none;
}

static inline void kern_node_mark_copied(const kern_node *kn, int input) {
    if (kn->copied && input >= 0 && input < 32) *kn->copied |= 1u << input;
}

/* ---- code generation (anvil compile, src/runtime/emit.c) --------------------------------------
 * A variant that can be emitted writes, for one planned node, the C statements of a standalone
 * library that compute it: calls into its own kernel sources, which the emitter copies beside the
 * generated code (the same files the runtime compiles, built against the shim in
 * src/emit/shim/ instead of anvil's headers), with the geometry baked in as constants and
 * the data it prepared (packed weights) stored in the weights file. */
typedef struct kern_emit kern_emit;
struct kern_emit {
    void *impl; /* the emitter's */
    /* Appends C text (printf format) to the node's statements. */
    void (*code)(kern_emit *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    /* Appends C text to the file scope before the run function (static helpers, tables). */
    void (*decl)(kern_emit *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    /* Stores bytes in the weights, 64-byte aligned, and writes into expr (cap bytes) a C
     * expression of type `const void *` that points at them while the library runs. */
    anvil_status (*blob)(kern_emit *e, const void *data, size_t bytes, char *expr, size_t cap);
    /* Marks a source file under src/ ("kernels/cpu/gemm/gemm.c") as needed by the library;
     * headers too. The files must be in the emitter's embedded set (emit_sources.cmake). */
    anvil_status (*need)(kern_emit *e, const char *file);
    /* need() for a header that the generated code itself includes (gemm.h), as opposed to the
     * headers that only the copied sources include (templates: gemm_ukernel.h). */
    anvil_status (*include)(kern_emit *e, const char *header);
    /* C expressions of input i / output i's data (`float *`-compatible `void *`), "NULL" for an
     * omitted input. Static strings valid during the write call. */
    const char *(*in)(kern_emit *e, int i);
    const char *(*out)(kern_emit *e, int i);
    const char *ws;  /* the node's workspace (`void *`, 64-byte aligned, at least workspace_size) */
    const char *ctx; /* the thread context (`op_ctx *`) */
    const op_tensor *in_t, *out_t; /* the node's input / output dtypes and dims ([n_in], [n_out]) */
    int n_in, n_out;
};

typedef struct kern_emitter {
    /* Writes the statements that compute kn with state as the variant's prepare made it; an
     * unsupported case is ANVIL_ERR_UNSUPPORTED with a message naming what (the emitter then lists
     * the node). */
    anvil_status (*write)(const kern_node *kn, const void *state, kern_emit *e);
    /* Optional: whether write can emit kn (NULL: every node the variant runs). A plan made to be
     * emitted (rt_session_config.emittable_only) passes over the variant where it says no. */
    bool (*can)(const kern_node *kn);
} kern_emitter;

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
    /* How `anvil compile` emits it (NULL: it cannot be emitted). */
    const kern_emitter *emit;
    /* Optional (NULL: fp32 only): which of kn's fp32 inputs (bit i of *in) and outputs (bit j of
     * *out) run also takes stored in bf16, i.e. as an op_tensor of dtype ANVIL_DTYPE_BFLOAT16
     * (the plan's placement of activations, runtime/plan_store.c). An input may be marked only
     * where run rounds it to bf16 (to nearest even) before any use, and an output only where run
     * can round what it would have written, so a value stored in bf16 between such ports gives
     * the same results as one stored in fp32 (up to the order of the reader's fp32 sums: a bf16
     * tile reads a stored bf16 A in place where it packs an fp32 one, and sums an edge of few
     * columns as a whole tile there rather than by columns). The one exception is asked for by the
     * session: under KERN_PREC_BF16 (kern_knobs_of(kn)->precision) an input may also be marked
     * where run widens it and computes in fp32 (a depthwise conv: "bf16 in memory, fp32
     * arithmetic"), and the results then differ by that rounding. state is what prepare made for
     * kn. */
    void (*bf16_io)(const kern_node *kn, const void *state, uint32_t *in, uint32_t *out);
} kern_variant;

/* Whether the default cascade (kern_select, conv_f32's rules) may pick v for kn: everything the
 * session accepts, except that a bf16 variant needs a measurement on its side. Under
 * KERN_PREC_AUTO that is the tuner's, which checks its error against the session's tolerance,
 * so the cascade never picks one; under KERN_PREC_BF16 it is this CPU's measured multiply rates
 * (peak_rates_get): bf16 only where its dot product beats the fp32 FMA, so a CPU whose bf16
 * unit is slower than its fp32 one runs fp32 without a rule naming it. KERN_PREC_FP16 the same
 * with the fp16 FMA's rate. */
bool kern_cascade_may_pick(const kern_variant *v, const kern_node *kn);
/* That measurement: whether the bf16 instruction a variant with these KERN_NEEDS_* bits
 * multiplies with (AMX's tile, vdpbf16ps, or the faster of the two for KERN_BF16_BEST_ISA)
 * measured more than 1.2x this CPU's fp32 FMA (peak_rates_get). */
bool kern_bf16_beats_fp32(uint32_t needs);
/* The same for AVX512-FP16's vfmadd231ph. */
bool kern_fp16_beats_fp32(void);

/* Whether v can be emitted for kn: it has an emitter that does not refuse kn. */
static inline bool kern_emittable(const kern_variant *v, const kern_node *kn) {
    return v->emit && (!v->emit->can || v->emit->can(kn));
}

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
extern const kern_variant *const kern_family_quant[];   /* cpu/quant: int8 QLinear, Q / DQ */
/* The dynamic int8 MatMul and Gemm (cpu/gemm/gemm_dynamic.c), first in the gemm family's list. */
extern const kern_variant gemm_variant_i8_dynamic, gemm_variant_i8_dynamic_gemm;
extern const kern_variant *const kern_family_vendor[]; /* vendor: oneDNN, OpenBLAS, BLIS */

/* Upper bound on the variants of one op (reference included). */
#define KERN_MAX_VARIANTS 48

/* The reference variant of op (variant 0). Never NULL. */
const kern_variant *kern_reference(ir_op op);
/* Every variant registered for op, reference first. *count set; pointer to static data. */
const kern_variant *const *kern_variants(ir_op op, size_t *count);
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
