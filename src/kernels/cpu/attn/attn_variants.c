/* The attention family: anvil.Sdpa as "sdpa_avx512" and "sdpa_avx2" (attn.h), "sdpa_bf16"
 * (AVX-512 with bf16 products, offered only to sessions that accept bf16) and "sdpa_fp16" (fp16
 * products, for sessions that accept fp16).
 *
 * This file is baseline code: supports() takes float32 nodes of static shapes whose k and v have
 * their head-size elements contiguous (what every layout the attention pass absorbs gives:
 * the head size is the last dim of every projection); prepare computes the geometry once per
 * plan; run hands the tensors to attn_exec (attn_run.c), which splits the (batch, head, query
 * block) jobs across threads. The emitter bakes the same attn_state into the library's code and
 * calls the same attn_exec. */
#include "attn.h"
#include "kernels/cpu/family.h"
#include "kernels/fusion.h"
#include "ops/sdpa_common.h"

#include <stdlib.h>
#include <string.h>

static bool attn_geom_of(const kern_node *kn, sdpa_geom *g) {
    const ir_shape *sh[5] = {NULL};
    for (int i = 0; i < kn->n_in && i < 5; i++)
        if (kern_has_input(kn, i)) sh[i] = &kn->in[i].shape;
    return sdpa_geometry(kn->node, sh, kn->n_in < 5 ? kn->n_in : 5, g) == ANVIL_OK;
}

static bool attn_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    if (!kn->node->params || kn->n_in < 3 || kn->n_out != 1) return false;
    for (int i = 0; i < kn->n_in; i++) {
        if (!kern_has_input(kn, i)) continue;
        if (!ir_shape_is_static(&kn->in[i].shape)) return false;
        if (i != SDPA_KEEP && kn->in[i].dtype != ANVIL_DTYPE_FLOAT32) return false;
    }
    sdpa_geom g;
    if (!kfam_f32_static(&kn->out[0]) || !attn_geom_of(kn, &g)) return false;
    return g.k[3] == 1 && g.v[3] == 1 && g.d > 0 && g.dv > 0;
}

/* Keys per block: the configuration's (the tuner's "kb"), else the ISA's default, then evened out
 * over the blocks the keys need (128 keys at 120 per block would be blocks of 120 and 8, whose
 * last tile is mostly padding; evened, 66 and 62), as a multiple of the key tile. */
static int64_t attn_kb(const kern_node *kn, const attn_isa *isa, const sdpa_geom *g) {
    int64_t kb = kern_param(kn, 0) > 0 ? kern_param(kn, 0) : isa->nb;
    const int64_t t = isa->key_tile;
    if (g->sk > 0) {
        const int64_t blocks = (g->sk + kb - 1) / kb;
        kb = (g->sk + blocks - 1) / blocks;
    }
    return (kb + t - 1) / t * t;
}

/* Whether a sequence's last `rest` queries (0 < rest < mb) go to one wide block, partly empty,
 * rather than to narrow blocks: the tuner's "tail" (1 narrow, 2 wide), else a rule. A narrow block
 * has a quarter of the wide one's accumulators, so it reuses each broadcast key and value a
 * quarter as often; measured on a Zen 4 (bf16 and fp32), a query in a narrow block cost about
 * twice one in a wide block, so the rule takes the wide block once it is at least half full. */
static bool attn_wide_tail(const kern_node *kn, const attn_isa *isa, int64_t rest) {
    const int32_t tail = kern_param(kn, 1);
    if (tail > 0) return tail == 2;
    return 2 * rest >= isa->mb;
}

static size_t attn_ws_of(const kern_node *kn, const attn_isa *isa, const sdpa_geom *g) {
    return (attn_ws_floats(isa, g, attn_kb(kn, isa, g)) + 15) & ~(size_t)15;
}

static size_t attn_threads_of(const kern_node *kn) {
    return kn->threads > 0 ? (size_t)kn->threads : 1;
}

static size_t attn_workspace_avx512(const kern_node *kn) {
    sdpa_geom g;
    if (!attn_geom_of(kn, &g)) return 0;
    return attn_ws_of(kn, &attn_isa_avx512, &g) * attn_threads_of(kn) * sizeof(float);
}

static size_t attn_workspace_avx2(const kern_node *kn) {
    sdpa_geom g;
    if (!attn_geom_of(kn, &g)) return 0;
    return attn_ws_of(kn, &attn_isa_avx2, &g) * attn_threads_of(kn) * sizeof(float);
}

static anvil_status attn_prepare_isa(const kern_node *kn, const attn_isa *isa, void **state) {
    attn_state *s = calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    const sdpa_params *pp = kn->node->params;
    if (!attn_geom_of(kn, &s->p.g)) {
        free(s);
        return core_err(ANVIL_ERR_INTERNAL, "%s: operands do not fit (supports() accepted them)",
                        ir_node_label(kn->node));
    }
    s->isa = isa;
    s->p.scale = pp->scale;
    s->p.fill = pp->fill;
    s->p.invert = pp->invert;
    s->p.causal = pp->causal != 0;
    s->p.coff = sdpa_causal_offset(pp, s->p.g.sq, s->p.g.sk);
    s->p.softcap = pp->softcap;
    /* whole wide blocks, then narrow ones for the rest (197 queries, ViT's, are 3 blocks of 64
     * and one of 16 instead of a fourth block of 64 with 5 queries in it), or a last wide block
     * partly empty where the rest is large (attn_wide_tail) */
    const int64_t rest = s->p.g.sq % isa->mb;
    s->wide = s->p.g.sq / isa->mb + (rest && attn_wide_tail(kn, isa, rest) ? 1 : 0);
    s->qblocks = s->wide + (s->p.g.sq - s->wide * isa->mb > 0
                                ? (s->p.g.sq - s->wide * isa->mb + isa->narrow - 1) / isa->narrow
                                : 0);
    s->jobs = s->p.g.batch * s->p.g.heads * s->qblocks;
    s->p.kb = attn_kb(kn, isa, &s->p.g);
    s->ws_floats = attn_ws_of(kn, isa, &s->p.g);
    s->threads = (int)attn_threads_of(kn);
    *state = s;
    return ANVIL_OK;
}

static size_t attn_workspace_bf16(const kern_node *kn) {
    sdpa_geom g;
    if (!attn_geom_of(kn, &g)) return 0;
    return attn_ws_of(kn, &attn_isa_avx512bf16, &g) * attn_threads_of(kn) * sizeof(float);
}

static anvil_status attn_prepare_bf16(const kern_node *kn, void **state) {
    return attn_prepare_isa(kn, &attn_isa_avx512bf16, state);
}

static bool attn_supports_fp16(const kern_node *kn, const core_hw *hw) {
    return attn_isa_avx512fp16.block && attn_supports(kn, hw);
}

static size_t attn_workspace_fp16(const kern_node *kn) {
    sdpa_geom g;
    if (!attn_geom_of(kn, &g)) return 0;
    return attn_ws_of(kn, &attn_isa_avx512fp16, &g) * attn_threads_of(kn) * sizeof(float);
}

static anvil_status attn_prepare_fp16(const kern_node *kn, void **state) {
    return attn_prepare_isa(kn, &attn_isa_avx512fp16, state);
}

static anvil_status attn_prepare_avx512(const kern_node *kn, void **state) {
    return attn_prepare_isa(kn, &attn_isa_avx512, state);
}

static anvil_status attn_prepare_avx2(const kern_node *kn, void **state) {
    return attn_prepare_isa(kn, &attn_isa_avx2, state);
}

static void attn_release(void *state) {
    free(state);
}

static anvil_status attn_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const attn_state *s = state;
    const float *mask = n_in > SDPA_MASK && in[SDPA_MASK] ? in[SDPA_MASK]->data : NULL;
    const bool *keep = n_in > SDPA_KEEP && in[SDPA_KEEP] ? in[SDPA_KEEP]->data : NULL;
    attn_exec(s, in[SDPA_Q]->data, in[SDPA_K]->data, in[SDPA_V]->data, mask, keep, out[0]->data,
              op_tensor_numel(out[0]), workspace, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The node becomes one attn_exec call on an attn_state holding what this prepare made, so the
 * library computes exactly what the variant does. The blocks' exponentials are attn_tmpl.h's own
 * polynomial, not SLEEF's, so every node the variant runs can be emitted. */

static const char *const attn_emit_files[] = {"ops/sdpa_geom.h",
                                              "kernels/cpu/attn/attn.h",
                                              "kernels/cpu/attn/attn_run.c",
                                              "kernels/cpu/attn/attn_tmpl.h",
                                              "kernels/cpu/attn/attn_avx512.c",
                                              "kernels/cpu/attn/attn_avx2.c",
                                              "kernels/cpu/attn/attn_avx512bf16.c",
                                              "kernels/cpu/attn/attn_avx512fp16.c",
                                              "kernels/cpu/attn/attn_vec_avx512.h",
                                              "kernels/cpu/eltwise/eltwise_vec_avx512.h",
                                              "kernels/cpu/eltwise/eltwise_vec_avx2.h",
                                              NULL};

/* "as.p.g.NAME[0..3] = ..." */
static void attn_emit_4(kern_emit *e, const char *name, const int64_t *v) {
    e->code(
        e,
        "as.p.g.%s[0] = %lld;\nas.p.g.%s[1] = %lld;\nas.p.g.%s[2] = %lld;\nas.p.g.%s[3] = %lld;\n",
        name, (long long)v[0], name, (long long)v[1], name, (long long)v[2], name, (long long)v[3]);
}

static anvil_status attn_emit_write(const kern_node *kn, const void *state, kern_emit *e) {
    const attn_state *s = state;
    const sdpa_geom *g = &s->p.g;
    for (int i = 0; attn_emit_files[i]; i++) CORE_TRY(e->need(e, attn_emit_files[i]));
    CORE_TRY(e->include(e, "kernels/cpu/attn/attn.h"));
    char f[64];
    e->code(e, "attn_state as = {0};\n");
    e->code(e, "as.isa = &%s;\n",
            s->isa == &attn_isa_avx512       ? "attn_isa_avx512"
            : s->isa == &attn_isa_avx512bf16 ? "attn_isa_avx512bf16"
            : s->isa == &attn_isa_avx512fp16 ? "attn_isa_avx512fp16"
                                             : "attn_isa_avx2");
    e->code(e, "as.jobs = %lld;\nas.qblocks = %lld;\nas.wide = %lld;\n", (long long)s->jobs,
            (long long)s->qblocks, (long long)s->wide);
    e->code(e, "as.ws_floats = %zu;\nas.threads = %d;\n", s->ws_floats, s->threads);
    e->code(e, "as.p.scale = %s;\n", kern_emit_float(s->p.scale, f, sizeof f));
    e->code(e, "as.p.fill = %s;\n", kern_emit_float(s->p.fill, f, sizeof f));
    e->code(e, "as.p.softcap = %s;\n", kern_emit_float(s->p.softcap, f, sizeof f));
    e->code(e, "as.p.invert = %d;\nas.p.causal = %d;\nas.p.coff = %lld;\nas.p.kb = %lld;\n",
            (int)s->p.invert, (int)s->p.causal, (long long)s->p.coff, (long long)s->p.kb);
    e->code(e,
            "as.p.g.batch = %lld;\nas.p.g.heads = %lld;\nas.p.g.sq = %lld;\nas.p.g.sk = %lld;\n"
            "as.p.g.d = %lld;\nas.p.g.dv = %lld;\nas.p.g.group = %lld;\n",
            (long long)g->batch, (long long)g->heads, (long long)g->sq, (long long)g->sk,
            (long long)g->d, (long long)g->dv, (long long)g->group);
    e->code(e, "as.p.g.off[0] = %lld;\nas.p.g.off[1] = %lld;\nas.p.g.off[2] = %lld;\n",
            (long long)g->off[0], (long long)g->off[1], (long long)g->off[2]);
    attn_emit_4(e, "q", g->q);
    attn_emit_4(e, "k", g->k);
    attn_emit_4(e, "v", g->v);
    attn_emit_4(e, "o", g->o);
    attn_emit_4(e, "mask", g->mask);
    attn_emit_4(e, "keep", g->keep);
    e->code(e, "as.p.g.has_mask = %d;\nas.p.g.has_keep = %d;\n", (int)g->has_mask,
            (int)g->has_keep);
    const char *mask = g->has_mask && kern_has_input(kn, SDPA_MASK) ? e->in(e, SDPA_MASK) : "NULL";
    const char *keep = g->has_keep && kern_has_input(kn, SDPA_KEEP) ? e->in(e, SDPA_KEEP) : "NULL";
    e->code(e,
            "attn_exec(&as, (const float *)(%s), (const float *)(%s), (const float *)(%s), "
            "(const float *)(%s), (const bool *)(%s), (float *)(%s), %zu, (float *)(%s), %s);\n",
            e->in(e, SDPA_Q), e->in(e, SDPA_K), e->in(e, SDPA_V), mask, keep, e->out(e, 0),
            op_tensor_numel(&e->out_t[0]), e->ws, e->ctx);
    return ANVIL_OK;
}

static const kern_emitter attn_emitter = {attn_emit_write, NULL};

/* The tuner's parameter: keys per block. Larger blocks rescale the accumulated output less often
 * and cut per-block work; smaller ones keep the scores in L1 (60 x 64 floats are 15 KB). */
static int attn_space_values(const kern_node *kn, const core_hw *hw, int i, int32_t *vals,
                             int cap) {
    (void)hw;
    static const int32_t kbs[] = {60, 120, 240};
    int n = 0;
    for (size_t k = 0; i == 0 && k < sizeof kbs / sizeof *kbs && n < cap; k++) vals[n++] = kbs[k];
    /* the last queries' blocks (attn_wide_tail), where the sequence leaves some past the widest
     * blocks (AVX-512's 64 queries) */
    sdpa_geom g;
    if (i == 1 && attn_geom_of(kn, &g) && g.sq % 64 != 0)
        for (int32_t t = 1; t <= 2 && n < cap; t++) vals[n++] = t;
    return n;
}

static const char *attn_space_label(int i, int32_t v) {
    if (i != 1) return NULL;
    return v == 1 ? "narrow" : v == 2 ? "wide" : NULL;
}

static const kern_space attn_space = {2, {"kb", "tail"}, attn_space_values, attn_space_label, NULL,
                                      0};

static const kern_variant v_sdpa_avx512 = {.name = "sdpa_avx512",
                                           .op = IR_OP_SDPA,
                                           .needs = KERN_NEEDS_AVX512,
                                           .supports = attn_supports,
                                           .workspace_size = attn_workspace_avx512,
                                           .prepare = attn_prepare_avx512,
                                           .release = attn_release,
                                           .run = attn_run,
                                           .space = &attn_space,
                                           .emit = &attn_emitter};

static const kern_variant v_sdpa_avx2 = {.name = "sdpa_avx2",
                                         .op = IR_OP_SDPA,
                                         .needs = KERN_NEEDS_AVX2,
                                         .supports = attn_supports,
                                         .workspace_size = attn_workspace_avx2,
                                         .prepare = attn_prepare_avx2,
                                         .release = attn_release,
                                         .run = attn_run,
                                         .space = &attn_space,
                                         .emit = &attn_emitter};

static const kern_variant v_sdpa_bf16 = {.name = "sdpa_bf16",
                                         .op = IR_OP_SDPA,
                                         .needs = KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 |
                                                  KERN_ROUNDS_BF16,
                                         .supports = attn_supports,
                                         .workspace_size = attn_workspace_bf16,
                                         .prepare = attn_prepare_bf16,
                                         .release = attn_release,
                                         .run = attn_run,
                                         .space = &attn_space,
                                         .emit = &attn_emitter};

/* The same with fp16 products (attn_avx512fp16.c), for sessions that accept fp16. */
static const kern_variant v_sdpa_fp16 = {.name = "sdpa_fp16",
                                         .op = IR_OP_SDPA,
                                         .needs = KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_FP16 |
                                                  KERN_ROUNDS_FP16,
                                         .supports = attn_supports_fp16,
                                         .workspace_size = attn_workspace_fp16,
                                         .prepare = attn_prepare_fp16,
                                         .release = attn_release,
                                         .run = attn_run,
                                         .space = &attn_space,
                                         .emit = &attn_emitter};

/* The first applicable variant is the default: bf16 or fp16 where the session accepts it (and
 * the cascade's measurement favours it), then AVX-512. */
const kern_variant *const kern_family_attn[] = {&v_sdpa_bf16, &v_sdpa_fp16, &v_sdpa_avx512,
                                                &v_sdpa_avx2, NULL};
