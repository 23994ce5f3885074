/* The attention family: anvil.Sdpa as "sdpa_avx512" and "sdpa_avx2" (attn.h).
 *
 * This file is baseline code: supports() takes float32 nodes of static shapes whose k and v have
 * their head-size elements contiguous (what every layout the attention pass absorbs gives:
 * the head size is the last dim of every projection); prepare computes the geometry once per
 * plan; run splits the (batch, head, query block) jobs into one contiguous range per thread, each
 * with its own slice of the workspace. Consecutive jobs share a (batch, head), so a thread's k
 * and v stay in its cache across its query blocks. */
#include "attn.h"
#include "kernels/cpu/family.h"

#include <stdlib.h>
#include <string.h>

typedef struct attn_state {
    const attn_isa *isa;
    attn_prob p;           /* geometry, scale, fill; pointers set per run */
    int64_t jobs, qblocks; /* qblocks per (batch, head): wide ones, then narrow ones */
    int64_t wide;          /* wide blocks per (batch, head) */
    size_t ws_floats;      /* per thread, rounded up to 16 */
    int threads;           /* slices the workspace holds */
} attn_state;

static bool attn_geom_of(const kern_node *kn, sdpa_geom *g) {
    const ir_shape *sh[5] = {NULL};
    for (int i = 0; i < kn->n_in && i < 5; i++)
        if (kfam_has_input(kn, i)) sh[i] = &kn->in[i].shape;
    return sdpa_geometry(kn->node, sh, kn->n_in < 5 ? kn->n_in : 5, g) == ANVIL_OK;
}

static bool attn_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    if (!kn->node->params || kn->n_in < 3 || kn->n_out != 1) return false;
    for (int i = 0; i < kn->n_in; i++) {
        if (!kfam_has_input(kn, i)) continue;
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
    /* whole wide blocks, then narrow ones for the rest: 197 queries (ViT) are 3 blocks of 64
     * and one of 16 instead of a fourth block of 64 with 5 queries in it */
    s->wide = s->p.g.sq / isa->mb;
    s->qblocks = s->wide + (s->p.g.sq - s->wide * isa->mb + isa->narrow - 1) / isa->narrow;
    s->jobs = s->p.g.batch * s->p.g.heads * s->qblocks;
    s->p.kb = attn_kb(kn, isa, &s->p.g);
    s->ws_floats = attn_ws_of(kn, isa, &s->p.g);
    s->threads = (int)attn_threads_of(kn);
    *state = s;
    return ANVIL_OK;
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

typedef struct attn_run_job {
    const attn_state *s;
    const attn_prob *p;
    float *ws;
    size_t slots;
} attn_run_job;

static void attn_slot(void *arg, size_t begin, size_t end) {
    const attn_run_job *j = arg;
    const attn_state *s = j->s;
    const int64_t per_bh = s->qblocks, heads = s->p.g.heads;
    for (size_t slot = begin; slot < end; slot++) {
        float *ws = j->ws + slot * s->ws_floats;
        const int64_t lo = (int64_t)(slot * (size_t)s->jobs / j->slots);
        const int64_t hi = (int64_t)((slot + 1) * (size_t)s->jobs / j->slots);
        for (int64_t t = lo; t < hi; t++) {
            const int64_t bh = t / per_bh, qb = t % per_bh;
            if (qb < s->wide)
                s->isa->block(j->p, bh / heads, bh % heads, qb * s->isa->mb, ws);
            else
                s->isa->block_narrow(j->p, bh / heads, bh % heads,
                                     s->wide * s->isa->mb + (qb - s->wide) * s->isa->narrow, ws);
        }
    }
}

static anvil_status attn_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const attn_state *s = state;
    if (s->jobs == 0) return ANVIL_OK;
    if (s->p.g.sk == 0) {
        memset(out[0]->data, 0, op_tensor_numel(out[0]) * sizeof(float));
        return ANVIL_OK;
    }
    attn_prob p = s->p;
    p.q = (const float *)in[SDPA_Q]->data + p.g.off[0];
    p.k = (const float *)in[SDPA_K]->data + p.g.off[1];
    p.v = (const float *)in[SDPA_V]->data + p.g.off[2];
    p.mask = p.g.has_mask && n_in > SDPA_MASK ? in[SDPA_MASK]->data : NULL;
    p.keep = p.g.has_keep && n_in > SDPA_KEEP ? in[SDPA_KEEP]->data : NULL;
    p.o = out[0]->data;
    size_t slots = (size_t)op_ctx_threads(ctx);
    if (slots > (size_t)s->threads) slots = (size_t)s->threads;
    if (slots > (size_t)s->jobs) slots = (size_t)s->jobs;
    attn_run_job j = {.s = s, .p = &p, .ws = workspace, .slots = slots};
    op_parallel_for(slots > 1 ? ctx : NULL, slots, attn_slot, &j);
    return ANVIL_OK;
}

/* The tuner's parameter: keys per block. Larger blocks rescale the accumulated output less often
 * and cut per-block work; smaller ones keep the scores in L1 (60 x 64 floats are 15 KB). */
static int attn_space_values(const kern_node *kn, const core_hw *hw, int i, int32_t *vals,
                             int cap) {
    (void)kn;
    (void)hw;
    static const int32_t kbs[] = {60, 120, 240};
    int n = 0;
    for (size_t k = 0; i == 0 && k < sizeof kbs / sizeof *kbs && n < cap; k++) vals[n++] = kbs[k];
    return n;
}

static const kern_space attn_space = {1, {"kb"}, attn_space_values, NULL, NULL, 0};

static const kern_variant v_sdpa_avx512 = {.name = "sdpa_avx512",
                                           .op = IR_OP_SDPA,
                                           .needs = KERN_NEEDS_AVX512,
                                           .supports = attn_supports,
                                           .workspace_size = attn_workspace_avx512,
                                           .prepare = attn_prepare_avx512,
                                           .release = attn_release,
                                           .run = attn_run,
                                           .space = &attn_space};

static const kern_variant v_sdpa_avx2 = {.name = "sdpa_avx2",
                                         .op = IR_OP_SDPA,
                                         .needs = KERN_NEEDS_AVX2,
                                         .supports = attn_supports,
                                         .workspace_size = attn_workspace_avx2,
                                         .prepare = attn_prepare_avx2,
                                         .release = attn_release,
                                         .run = attn_run,
                                         .space = &attn_space};

/* The AVX-512 variant first: the first applicable variant is the default. */
const kern_variant *const kern_family_attn[] = {&v_sdpa_avx512, &v_sdpa_avx2, NULL};
