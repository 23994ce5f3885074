/* MatMul and Gemm on anvil's GEMM (gemm.h), as variants.
 *
 * Per op there is one variant per register tile ("gemm_f32_14x32_avx512", ...) so the tuner and
 * users can force any of them, and first a "gemm_f32" variant that picks the tile from the shape
 * with gemm_kernel_default: the default cascade takes it whenever the node is fp32.
 *
 * The bf16 tiles make the same variants under "gemm_bf16" ("gemm_bf16_14x32_avx512bf16"): fp32
 * tensors in and out, operands rounded to bf16 as they are packed, fp32 sums. They are
 * KERN_ROUNDS_BF16, so only sessions that accept bf16 see them, and "gemm_bf16" comes first in
 * the cascade: a session that asks for bf16 gets it wherever the CPU has the instruction, and the
 * tuner weighs it against the fp32 tiles by time. The fp16 tiles the same under "gemm_fp16"
 * (KERN_ROUNDS_FP16), for sessions that accept fp16.
 *
 * A constant B (the weights of a MatMul or Gemm) is packed once in prepare. MatMul batch dims
 * broadcast: when B is one matrix, A's batch dims fold into M (one big GEMM, better tiles);
 * otherwise each batch item is its own GEMM, run in parallel over items when there are enough of
 * them, else one after another with the threads inside each GEMM. */
#include "gemm.h"
#include "kernels/fusion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "gemm_f32"
#define PREFIX_BF16 "gemm_bf16"
#define PREFIX_FP16 "gemm_fp16"

typedef struct gemm_state {
    const gemm_kernel *k;
    gemm_blocking blk;
    bool is_gemm;
    /* Gemm attributes */
    bool trans_a, trans_b;
    float alpha, beta;
    /* Problem geometry (static per plan). */
    int64_t m, n, kdim;
    int64_t batch;  /* output batch items (MatMul); 1 for Gemm or folded */
    bool fold;      /* MatMul with one B matrix: A's batch folded into m */
    gemm_packed pb; /* constant B packed; data NULL otherwise */
    int threads;
    bool batch_parallel;
    const ir_fusion *fusion; /* the node's fused epilogue, applied in gemm's (NULL: none) */
} gemm_state;

static void matmul_geometry(const kern_node *kn, gemm_state *s);

/* The shape-driven default takes the rows of the GEMM that runs: a MatMul whose B is one matrix
 * folds A's batch into M. Judged by A's last-but-one dim alone, torch's attention input
 * projection ([197, 1, 384] x [384, 1152], ViT) took the one-row GEMV tile for 197 rows: 53
 * GFLOP/s instead of 100. */
static void node_mn(const kern_node *kn, int64_t *mp, int64_t *np) {
    const op_tinfo *out = &kn->out[0];
    int r = out->shape.rank;
    int64_t m = r >= 2 ? out->shape.d[r - 2] : 1, n = r >= 1 ? out->shape.d[r - 1] : 1;
    if (kn->node->op == IR_OP_MATMUL && kn->n_in >= 2 && kn->in[0].shape.rank >= 1 &&
        kn->in[1].shape.rank >= 1) {
        gemm_state g = {0};
        matmul_geometry(kn, &g);
        m = g.m;
        n = g.n;
    }
    *mp = m;
    *np = n;
}

const gemm_kernel *gemm_node_default_kernel(const kern_node *kn) {
    int64_t m, n;
    node_mn(kn, &m, &n);
    return gemm_kernel_default(m, n, 0, core_hw_get());
}

/* The variant's tile: the one its name ends in, else its format's default for the node. */
static const gemm_kernel *kernel_of(const kern_variant *v, const kern_node *kn) {
    const bool bf16 = v->needs & KERN_ROUNDS_BF16, fp16 = v->needs & KERN_ROUNDS_FP16;
    const char *tail = v->name + strlen(bf16 ? PREFIX_BF16 : fp16 ? PREFIX_FP16 : PREFIX);
    if (*tail == '_')
        return bf16   ? gemm_kernel_find_bf16(tail + 1)
               : fp16 ? gemm_kernel_find_fp16(tail + 1)
                      : gemm_kernel_find(tail + 1);
    if (!bf16 && !fp16) return gemm_node_default_kernel(kn);
    int64_t m, n;
    node_mn(kn, &m, &n);
    return bf16 ? gemm_kernel_default_bf16(m, n, 0, core_hw_get())
                : gemm_kernel_default_fp16(m, n, 0, core_hw_get());
}

static bool static_f32(const op_tinfo *t) {
    return t->dtype == ANVIL_DTYPE_FLOAT32 && ir_shape_is_static(&t->shape);
}

static bool supports_common(const kern_node *kn, const core_hw *hw, const kern_variant *v) {
    if (kn->n_in < 2 || !static_f32(&kn->in[0]) || !static_f32(&kn->in[1]) ||
        !static_f32(&kn->out[0]))
        return false;
    const gemm_kernel *k = kernel_of(v, kn);
    return k && gemm_kernel_usable(k, hw);
}

/* ---- geometry ------------------------------------------------------------------------------ */

static int64_t dim(const op_tinfo *t, int i) {
    return t->shape.d[i];
}

/* MatMul operand dims as (batch..., rows, cols) after numpy's 1-D promotion. */
static void matmul_geometry(const kern_node *kn, gemm_state *s) {
    const op_tinfo *a = &kn->in[0], *b = &kn->in[1], *y = &kn->out[0];
    int ra = a->shape.rank, rb = b->shape.rank;
    s->kdim = dim(a, ra - 1);
    s->m = ra >= 2 ? dim(a, ra - 2) : 1;
    s->n = rb >= 2 ? dim(b, rb - 1) : 1;
    int64_t yb = 1;
    int ry = y->shape.rank - (ra >= 2 ? 1 : 0) - (rb >= 2 ? 1 : 0);
    for (int i = 0; i < ry; i++) yb *= dim(y, i);
    int64_t bb = 1;
    for (int i = 0; i < rb - 2; i++) bb *= dim(b, i);
    s->fold = rb <= 2 || bb == 1;
    if (s->fold) {
        s->m *= yb;
        s->batch = 1;
    } else {
        s->batch = yb;
    }
}

/* Offsets (in elements) of batch item `idx` in A and B, numpy broadcasting. */
static void batch_offsets(const op_tensor *a, const op_tensor *b, const op_tensor *y, int64_t idx,
                          int64_t *oa, int64_t *ob) {
    int ra = a->rank, rb = b->rank;
    int yr = y->rank - (ra >= 2 ? 1 : 0) - (rb >= 2 ? 1 : 0);
    int64_t sa = (ra >= 2 ? a->dims[ra - 2] : 1) * a->dims[ra - 1];
    int64_t sb = (rb >= 2 ? b->dims[rb - 1] : 1) * b->dims[rb >= 2 ? rb - 2 : 0];
    int ba = ra - 2, bbr = rb - 2;
    *oa = 0;
    *ob = 0;
    for (int i = yr - 1; i >= 0; i--) {
        int64_t yi = idx % y->dims[i];
        idx /= y->dims[i];
        int ia = i - (yr - ba), ib = i - (yr - bbr);
        if (ia >= 0 && a->dims[ia] != 1) *oa += yi * sa;
        if (ib >= 0 && b->dims[ib] != 1) *ob += yi * sb;
        if (ia >= 0) sa *= a->dims[ia];
        if (ib >= 0) sb *= b->dims[ib];
    }
}

/* ---- prepare / release ------------------------------------------------------------------------
 */

/* Everything about the problem that the node's shapes and attributes decide: the kernel, the
 * Gemm attributes, the geometry and the blocking. Shared by workspace_size and prepare. */
static int64_t round_to(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

/* The knobs replace only what the configuration leaves; they are not clipped to the problem, as
 * a configuration is, so an experiment gets exactly the blocks it names. */
gemm_blocking gemm_blocking_for(const kern_node *kn, const gemm_kernel *k, int64_t m, int64_t n,
                                int64_t kdim, const core_hw *hw, int64_t kc, int64_t mc,
                                int64_t nc) {
    gemm_blocking b = gemm_blocking_config(k, m, n, kdim, hw, kc, mc, nc);
    const kern_knobs *kb = kern_knobs_of(kn);
    if (mc <= 0 && kb->gemm_mc > 0) b.mc = round_to(kb->gemm_mc, k->mr);
    if (kc <= 0 && kb->gemm_kc > 0) {
        b.kc = kb->gemm_kc;
        /* every block but the last must hold whole bf16 pairs (as gemm_blocking_config's) */
        if (k->kpair == 2) b.kc += b.kc & 1;
    }
    if (nc <= 0 && kb->gemm_nc > 0) b.nc = round_to(kb->gemm_nc, k->nr);
    return b;
}

static anvil_status geometry(const kern_variant *v, const kern_node *kn, gemm_state *s) {
    s->k = kernel_of(v, kn);
    s->is_gemm = kn->node->op == IR_OP_GEMM;
    s->threads = kn->threads > 0 ? kn->threads : 1;
    if (s->is_gemm) {
        anvil_status st;
        if ((st = ir_attr_flag(kn->node, "transA", false, &s->trans_a)) != ANVIL_OK ||
            (st = ir_attr_flag(kn->node, "transB", false, &s->trans_b)) != ANVIL_OK ||
            (st = ir_attr_float(kn->node, "alpha", 1.0f, &s->alpha)) != ANVIL_OK ||
            (st = ir_attr_float(kn->node, "beta", 1.0f, &s->beta)) != ANVIL_OK)
            return st;
        s->m = dim(&kn->out[0], 0);
        s->n = dim(&kn->out[0], 1);
        s->kdim = s->trans_a ? dim(&kn->in[0], 0) : dim(&kn->in[0], 1);
        s->batch = 1;
        s->fold = true;
    } else {
        matmul_geometry(kn, s);
    }
    /* the tuner's configuration, where it sets one: KC, MC, NC (0 keeps each default) */
    s->blk = gemm_blocking_for(kn, s->k, s->m, s->n, s->kdim, core_hw_get(), kern_param(kn, 0),
                               kern_param(kn, 1), kern_param(kn, 2));
    /* Many small items (attention heads): one item per thread beats splitting each tiny GEMM. */
    s->batch_parallel = s->batch >= s->threads && s->threads > 1;
    return ANVIL_OK;
}

static bool fuses_common(const kern_node *kn);

static anvil_status prepare_common(const kern_variant *v, const kern_node *kn, void **state) {
    gemm_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status st = geometry(v, kn, s);
    const op_tinfo *b = &kn->in[1];
    if (st == ANVIL_OK && b->value && s->fold) {
        /* Gemm's transB reads B as [N, K]; MatMul's B is [K, N]. */
        int64_t rs = s->trans_b ? 1 : s->n, cs = s->trans_b ? s->kdim : 1;
        st = gemm_pack_b(s->k, s->kdim, s->n, b->value, rs, cs, &s->pb);
    }
    if (st != ANVIL_OK) {
        gemm_packed_free(&s->pb);
        free(s);
        return st;
    }
    if (s->pb.data) kern_node_mark_copied(kn, 1);
    /* where the runtime applies the fusion after run, run must not apply it too */
    s->fusion = fuses_common(kn) ? kn->node->fusion : NULL;
    *state = s;
    return ANVIL_OK;
}

static void release(void *state) {
    gemm_state *s = state;
    if (!s) return;
    gemm_packed_free(&s->pb);
    free(s);
}

/* An output placed in bf16 (kn->out[0]'s dtype as the plan's placement leaves it) may need
 * rows of partial sums (gemm_thread_workspace_c16). */
static size_t workspace_common(const kern_variant *v, const kern_node *kn) {
    gemm_state s = {0};
    if (geometry(v, kn, &s) != ANVIL_OK) return 0; /* prepare reports the error */
    const size_t per = kn->out[0].dtype == ANVIL_DTYPE_BFLOAT16
                           ? gemm_thread_workspace_c16(s.k, &s.blk, s.n, s.kdim)
                           : gemm_thread_workspace(s.k, &s.blk);
    return (size_t)s.threads * per;
}

/* kern_variant.bf16_io: a bf16 tile of one GEMM (a MatMul whose B is one matrix, or a Gemm) reads
 * a row-major A stored in bf16 where its B is packed (A is then only ever rounded by pack_a), and
 * writes C in bf16 where its epilogue is all its own. */
static void bf16_io_common(const kern_node *kn, const void *state, uint32_t *in, uint32_t *out) {
    const gemm_state *s = state;
    *in = *out = 0;
    if (!s || !gemm_takes_bf16(s->k) || !s->fold) return;
    if (s->pb.data && !(s->is_gemm && s->trans_a)) *in = 1u;
    if (!kn->node->fusion || s->fusion) *out = 1u;
}

static bool is_bf16(const op_tensor *t) {
    return t && t->dtype == ANVIL_DTYPE_BFLOAT16;
}

/* ---- run ------------------------------------------------------------------------------------ */

typedef struct {
    const gemm_state *s;
    const op_tensor *const *in;
    const op_tensor *y;
    size_t ws_stride;
    char *ws;
} batch_job;

/* The node's fused epilogue over output rows of n columns: bias per column, residual laid out
 * like the output (r points at the residual of this GEMM's first row). */
static gemm_epilogue fused_epilogue(const gemm_state *s, const op_tensor *const *in,
                                    int64_t offset) {
    gemm_epilogue ep = kern_fusion_epilogue(s->fusion);
    if (!s->fusion) return ep;
    if (s->fusion->bias >= 0) ep.col_bias = in[s->fusion->bias]->data;
    if (s->fusion->residual >= 0) {
        ep.r = (const float *)in[s->fusion->residual]->data + offset;
        ep.rs_r = s->n;
        ep.cs_r = 1;
        ep.beta = 1.0f;
    }
    return ep;
}

static void matmul_item(const gemm_state *s, const op_tensor *const *in, const op_tensor *y,
                        int64_t idx, void *ws, op_ctx *ctx, bool serial) {
    const op_tensor *a = in[0], *b = in[1];
    int64_t oa, ob;
    batch_offsets(a, b, y, idx, &oa, &ob);
    gemm_problem p = {0};
    p.m = s->m;
    p.n = s->n;
    p.k = s->kdim;
    p.a = (const float *)a->data + oa;
    p.rs_a = s->kdim;
    p.cs_a = 1;
    p.b = (const float *)b->data + ob;
    p.rs_b = s->n;
    p.cs_b = 1;
    p.c = (float *)y->data + idx * s->m * s->n;
    p.ldc = s->n;
    p.ep = fused_epilogue(s, in, idx * s->m * s->n);
    if (serial)
        gemm_run_serial(s->k, &s->blk, &p, ws);
    else
        gemm_run(s->k, &s->blk, &p, ws, ctx);
}

/* The job is split into exactly `threads` indices, so index t is thread t's and owns workspace
 * slice t; it runs its share of the batch items one after another. */
static void batch_chunk(void *arg, size_t begin, size_t end) {
    batch_job *j = arg;
    const int64_t T = j->s->threads, items = j->s->batch;
    for (size_t t = begin; t < end; t++) {
        int64_t b0 = items * (int64_t)t / T, b1 = items * ((int64_t)t + 1) / T;
        void *ws = j->ws + t * j->ws_stride;
        for (int64_t i = b0; i < b1; i++) matmul_item(j->s, j->in, j->y, i, ws, NULL, true);
    }
}

static anvil_status matmul_run(const gemm_state *s, const op_tensor *const *in, op_tensor *y,
                               void *ws, op_ctx *ctx) {
    const op_tensor *a = in[0], *b = in[1];
    if (s->fold) {
        gemm_problem p = {0};
        p.m = s->m;
        p.n = s->n;
        p.k = s->kdim;
        if (is_bf16(a))
            p.a16 = a->data;
        else
            p.a = a->data;
        p.rs_a = s->kdim;
        p.cs_a = 1;
        if (s->pb.data) {
            p.pb = &s->pb;
        } else {
            p.b = b->data;
            p.rs_b = s->n;
            p.cs_b = 1;
        }
        if (is_bf16(y))
            p.c16 = y->data;
        else
            p.c = y->data;
        p.ldc = s->n;
        p.ep = fused_epilogue(s, in, 0);
        gemm_run(s->k, &s->blk, &p, ws, ctx);
        return ANVIL_OK;
    }
    if (s->batch_parallel) {
        batch_job j = {s, in, y, gemm_thread_workspace(s->k, &s->blk), ws};
        op_parallel_for(ctx, (size_t)s->threads, batch_chunk, &j);
        return ANVIL_OK;
    }
    for (int64_t i = 0; i < s->batch; i++) matmul_item(s, in, y, i, ws, ctx, false);
    return ANVIL_OK;
}

static anvil_status gemm_op_run(const gemm_state *s, const op_tensor *const *in, int n_in,
                                op_tensor *y, void *ws, op_ctx *ctx) {
    const op_tensor *a = in[0], *b = in[1], *c = n_in > 2 ? in[2] : NULL;
    gemm_problem p = {0};
    p.m = s->m;
    p.n = s->n;
    p.k = s->kdim;
    if (is_bf16(a))
        p.a16 = a->data;
    else
        p.a = a->data;
    p.rs_a = s->trans_a ? 1 : s->kdim;
    p.cs_a = s->trans_a ? s->m : 1;
    if (s->pb.data) {
        p.pb = &s->pb;
    } else {
        p.b = b->data;
        p.rs_b = s->trans_b ? 1 : s->n;
        p.cs_b = s->trans_b ? s->kdim : 1;
    }
    if (is_bf16(y))
        p.c16 = y->data;
    else
        p.c = y->data;
    p.ldc = s->n;
    p.ep = fused_epilogue(s, in, 0);
    p.ep.scale = s->alpha;
    if (c && c->data && s->beta != 0.0f) {
        /* C broadcasts to [M, N]: a dim of 1 (or a missing one) reads with stride 0. */
        int64_t cm = c->rank == 2 ? c->dims[0] : 1;
        int64_t cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        p.ep.r = c->data;
        p.ep.rs_r = cm == 1 ? 0 : cn;
        p.ep.cs_r = cn == 1 ? 0 : 1;
        p.ep.beta = s->beta;
    }
    /* (fuses_common refuses a fused residual next to C: the epilogue reads one R) */
    gemm_run(s->k, &s->blk, &p, ws, ctx);
    return ANVIL_OK;
}

static anvil_status run_common(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n_out;
    const gemm_state *s = state;
    if (is_bf16(in[0]) || is_bf16(out[0])) {
        /* only the placement binds bf16 tensors, and only where bf16_io said so */
        const kern_node kn = {.node = n};
        uint32_t bin, bout;
        bf16_io_common(&kn, s, &bin, &bout);
        if ((is_bf16(in[0]) && !(bin & 1u)) || (is_bf16(out[0]) && !(bout & 1u)))
            return core_err(ANVIL_ERR_INTERNAL, "node '%s': a bf16 tensor where %s takes fp32",
                            n->name ? n->name : "?", s->k->name);
    }
    if (s->is_gemm) return gemm_op_run(s, in, n_in, out[0], ws, ctx);
    return matmul_run(s, in, out[0], ws, ctx);
}

/* Bias, residual and activation all go into the GEMM epilogue, except a residual on a Gemm
 * that has its own C (both would be the epilogue's one R): the runtime adds that one after. */
static bool fuses_common(const kern_node *kn) {
    const ir_fusion *f = kn->node->fusion;
    if (!f || !kern_fusion_gemm_ok(f)) return !f;
    if (kn->node->op != IR_OP_GEMM || f->residual < 0) return true;
    float beta = 1.0f;
    bool has_c = kn->n_in > 2 && kn->node->inputs[2] != IR_NONE;
    return !has_c || (ir_attr_float(kn->node, "beta", 1.0f, &beta) == ANVIL_OK && beta == 0.0f);
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The node becomes one gemm_run call (one per batch item for a batched MatMul, the items' operand
 * offsets baked in) on the same kernel, blocking and packed B as the runtime's, with the fused
 * epilogue written out. */

static const char *const gemm_emit_files[] = {"kernels/cpu/gemm/gemm.h",
                                              "kernels/cpu/gemm/gemm.c",
                                              "kernels/cpu/gemm/gemm_epilogue.h",
                                              "kernels/cpu/gemm/gemm_ukernel.h",
                                              "kernels/cpu/gemm/gemm_avx512.c",
                                              "kernels/cpu/gemm/gemm_avx2.c",
                                              "kernels/cpu/gemm/gemm_avx512bf16.c",
                                              "kernels/cpu/gemm/gemm_avx512fp16.c",
                                              "kernels/cpu/gemm/gemm_pairs_avx512.h",
                                              "kernels/cpu/gemm/gemm_vec_avx512.h",
                                              "kernels/cpu/eltwise/eltwise_act.h",
                                              "kernels/cpu/eltwise/eltwise_exp.h",
                                              "kernels/cpu/eltwise/eltwise_vec_avx512.h",
                                              "kernels/cpu/eltwise/eltwise_vec_avx2.h",
                                              NULL};

anvil_status gemm_emit_files_need(kern_emit *e) {
    for (int i = 0; gemm_emit_files[i]; i++) CORE_TRY(e->need(e, gemm_emit_files[i]));
    return e->include(e, "kernels/cpu/gemm/gemm.h");
}

/* `const gemm_kernel *VAR` naming k, and `gemm_blocking VAR_blk`. */
void gemm_emit_kernel(kern_emit *e, const char *var, const gemm_kernel *k, const gemm_blocking *b) {
    e->decl(e, "extern const gemm_kernel gemm_kernel_%s;\n", k->name);
    e->code(e, "const gemm_kernel *%s = &gemm_kernel_%s;\n", var, k->name);
    e->code(e, "const gemm_blocking %s_blk = {%lld, %lld, %lld};\n", var, (long long)b->mc,
            (long long)b->kc, (long long)b->nc);
}

static anvil_status emit_write(const kern_node *kn, const void *state, kern_emit *e) {
    const gemm_state *s = state;
    CORE_TRY(gemm_emit_files_need(e));
    char wexpr[96] = "", cb[64] = "", rr[96] = "";
    if (s->pb.data) {
        const int64_t depth = gemm_slots(s->k, s->kdim); /* bf16 tiles: pairs along k */
        size_t bytes = (size_t)((s->n + s->k->nr - 1) / s->k->nr) * (size_t)s->k->nr *
                       (size_t)(depth > 0 ? depth : 1) * sizeof(float);
        CORE_TRY(e->blob(e, s->pb.data, bytes, wexpr, sizeof wexpr));
    }
    gemm_epilogue ep = kern_fusion_epilogue(s->fusion);
    if (s->fusion && s->fusion->bias >= 0) snprintf(cb, sizeof cb, "%s", e->in(e, s->fusion->bias));
    if (s->fusion && s->fusion->residual >= 0) {
        snprintf(rr, sizeof rr, "%s", e->in(e, s->fusion->residual));
        ep.rs_r = s->n;
        ep.cs_r = 1;
        ep.beta = 1.0f;
    }
    if (s->is_gemm) {
        ep.scale = s->alpha;
        const op_tensor *c = kn->n_in > 2 && kn->node->inputs[2] != IR_NONE ? &e->in_t[2] : NULL;
        if (c && s->beta != 0.0f) {
            int64_t cm = c->rank == 2 ? c->dims[0] : 1,
                    cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
            snprintf(rr, sizeof rr, "%s", e->in(e, 2));
            ep.rs_r = cm == 1 ? 0 : cn;
            ep.cs_r = cn == 1 ? 0 : 1;
            ep.beta = s->beta;
        }
    }
    gemm_emit_kernel(e, "k", s->k, &s->blk);
    kern_emit_epilogue(e, "ep", &ep, NULL, *cb ? cb : NULL, *rr ? rr : NULL);
    if (s->pb.data)
        e->code(e, "const gemm_packed pb = {k, %lld, %lld, (float *)(%s)};\n", (long long)s->kdim,
                (long long)s->n, wexpr);
    const bool ta = s->is_gemm && s->trans_a, tb = s->is_gemm && s->trans_b;
    if (s->fold || s->is_gemm) {
        e->code(e, "gemm_problem p = {0};\n");
        e->code(e, "p.m = %lld;\np.n = %lld;\np.k = %lld;\n", (long long)s->m, (long long)s->n,
                (long long)s->kdim);
        e->code(e, "p.a = (const float *)(%s);\np.rs_a = %lld;\np.cs_a = %lld;\n", e->in(e, 0),
                (long long)(ta ? 1 : s->kdim), (long long)(ta ? s->m : 1));
        if (s->pb.data)
            e->code(e, "p.pb = &pb;\n");
        else
            e->code(e, "p.b = (const float *)(%s);\np.rs_b = %lld;\np.cs_b = %lld;\n", e->in(e, 1),
                    (long long)(tb ? 1 : s->n), (long long)(tb ? s->kdim : 1));
        e->code(e, "p.c = (float *)(%s);\np.ldc = %lld;\np.ep = ep;\n", e->out(e, 0),
                (long long)s->n);
        e->code(e, "gemm_run(k, &k_blk, &p, %s, %s);\n", e->ws, e->ctx);
        return ANVIL_OK;
    }
    /* a batched MatMul: each item's A and B offsets, in elements */
    if (s->batch > 4096)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: a batched MatMul of %lld items",
                        ir_node_label(kn->node), (long long)s->batch);
    op_tensor a = e->in_t[0], b = e->in_t[1], y = e->out_t[0];
    e->code(e, "static const int64_t off[][2] = {");
    for (int64_t i = 0; i < s->batch; i++) {
        int64_t oa, ob;
        batch_offsets(&a, &b, &y, i, &oa, &ob);
        e->code(e, "%s{%lld, %lld}", i ? ", " : "", (long long)oa, (long long)ob);
    }
    e->code(e, "};\n");
    e->code(e, "for (int64_t i = 0; i < %lld; i++) {\n", (long long)s->batch);
    e->code(e, "gemm_problem p = {0};\n");
    e->code(e, "p.m = %lld;\np.n = %lld;\np.k = %lld;\n", (long long)s->m, (long long)s->n,
            (long long)s->kdim);
    e->code(e, "p.a = (const float *)(%s) + off[i][0];\np.rs_a = %lld;\np.cs_a = 1;\n", e->in(e, 0),
            (long long)s->kdim);
    e->code(e, "p.b = (const float *)(%s) + off[i][1];\np.rs_b = %lld;\np.cs_b = 1;\n", e->in(e, 1),
            (long long)s->n);
    e->code(e, "p.c = (float *)(%s) + i * %lld;\np.ldc = %lld;\np.ep = ep;\n", e->out(e, 0),
            (long long)(s->m * s->n), (long long)s->n);
    if (*rr) e->code(e, "p.ep.r += i * %lld;\n", (long long)(s->m * s->n));
    e->code(e, "gemm_run(k, &k_blk, &p, %s, %s);\n}\n", e->ws, e->ctx);
    return ANVIL_OK;
}

static const kern_emitter gemm_emitter = {emit_write, NULL};

/* Whether text names gemm_kernel_<name> (the whole identifier). */
static bool names_tile(const char *text, const char *name) {
    char id[64];
    snprintf(id, sizeof id, "gemm_kernel_%s", name);
    for (const char *p = text; (p = strstr(p, id)) != NULL; p++) {
        char c = p[strlen(id)];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return true;
    }
    return false;
}

char *gemm_emit_tiles_header(const char *code) {
    size_t cap = 4096, len = 0;
    char *h = malloc(cap);
    if (!h) return NULL;
    len += (size_t)snprintf(h + len, cap - len,
                            "/* The register tiles this library's plan runs (written by anvil "
                            "compile; gemm.h). */\n");
    static const struct {
        const char *isa, *list;
        int vl;
        const gemm_kernel *const *tiles;
    } isas[] = {{"avx512", "AVX512", 16, gemm_kernels},
                {"avx2", "AVX2", 8, gemm_kernels},
                {"avx512bf16", "AVX512BF16", 16, gemm_kernels_bf16},
                {"avx512fp16", "AVX512FP16", 16, gemm_kernels_fp16},
                {"avx512vnni", "AVX512VNNI", 16, gemm_kernels_i8}};
    for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) {
        len += (size_t)snprintf(h + len, cap - len, "#define GEMM_TILES_%s(X)", isas[i].list);
        for (const gemm_kernel *const *k = isas[i].tiles; *k; k++) {
            const char *isa = strchr((*k)->name, '_');
            if (!isa || strcmp(isa + 1, isas[i].isa) || !names_tile(code, (*k)->name)) continue;
            if (len + 64 > cap) break;
            len += (size_t)snprintf(h + len, cap - len, " X(%d, %d, %d, %s)", (*k)->mr,
                                    (*k)->nr / isas[i].vl, (*k)->nr, isas[i].isa);
        }
        len += (size_t)snprintf(h + len, cap - len, "\n");
    }
    return h;
}

/* ---- the parameter space ------------------------------------------------------------------
 * "kc", "mc", "nc": the cache blocking (gemm_blocking_config). The driver (gemm.c) first splits C
 * among the threads (gemm_thread_grid) and then blocks each thread's part: the A micro-panel
 * (MR x KC) stays in L1 while the B block (KC x NC) is reused from L2 by every A panel of the
 * block, and the A block (MC x KC) is read again once per B block. The rules follow that. */

enum { P_KC, P_MC, P_NC };

/* The rows and columns of the largest thread part of C that the driver blocks for s with its
 * blocking (whole items when the batch is split by items). */
static void thread_part(const gemm_state *s, const kern_node *kn, int64_t *rows, int64_t *cols) {
    *rows = s->m;
    *cols = s->n;
    if (!s->fold && s->batch_parallel) return;
    /* the operands' layout as the run passes it (gemm_run's grid looks at strides and at which
     * operands are pre-packed, never at the data) */
    static const float dummy[1];
    static const gemm_packed packed = {0};
    gemm_problem p = {0};
    p.m = s->m;
    p.n = s->n;
    p.k = s->kdim;
    p.a = dummy;
    p.rs_a = s->trans_a ? 1 : s->kdim;
    p.cs_a = s->trans_a ? s->m : 1;
    if (kn->in[1].value && s->fold) {
        p.pb = &packed;
    } else {
        p.b = dummy;
        p.rs_b = s->trans_b ? 1 : s->n;
        p.cs_b = s->trans_b ? s->kdim : 1;
    }
    int tm, tn;
    gemm_thread_grid(s->k, &s->blk, &p, s->threads, &tm, &tn);
    const int64_t mu = (s->m + s->k->mr - 1) / s->k->mr, nu = (s->n + s->k->nr - 1) / s->k->nr;
    const int64_t r = (mu + tm - 1) / tm * s->k->mr, c = (nu + tn - 1) / tn * s->k->nr;
    if (r < *rows) *rows = r;
    if (c < *cols) *cols = c;
}

/* s for kn under configuration c (NULL: the default), and its thread part. */
static bool config_geometry(const kern_variant *v, const kern_node *kn, const kern_config *c,
                            gemm_state *s, int64_t *rows, int64_t *cols) {
    kern_node k2 = *kn;
    k2.config = c;
    memset(s, 0, sizeof *s);
    if (geometry(v, &k2, s) != ANVIL_OK || !s->k) return false;
    thread_part(s, kn, rows, cols);
    return true;
}

static int values_common(const kern_variant *v, const kern_node *kn, const core_hw *hw, int i,
                         int32_t *vals, int cap) {
    (void)hw;
    gemm_state s;
    int64_t rows, cols;
    if (!config_geometry(v, kn, NULL, &s, &rows, &cols)) return 0;
    if (i == P_KC) return gemm_kc_values(s.kdim, 0, vals, cap);
    if (i == P_MC) return gemm_mc_values(s.k, s.m, rows, vals, cap);
    if (i == P_NC) return gemm_nc_values(s.k, s.n, cols, vals, cap);
    return 0;
}

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* The A micro-panel stays in L1 across the block's NC / NR micro-kernel calls. */
static bool rule_a_panel(const kern_variant *v, const kern_node *kn, const core_hw *hw,
                         const kern_config *c) {
    gemm_state s;
    int64_t rows, cols;
    if (!config_geometry(v, kn, c, &s, &rows, &cols)) return true;
    return gemm_a_panel_fits_l1(s.k, gemm_kc_max(&s.blk, s.kdim, 0), hw);
}

/* The B block is what every A panel of the A block reads again (MC / MR times), so it belongs in
 * L2. The budget is the whole of L2: the default takes half, leaving room for the A panels and C
 * tiles passing through, and between the two is worth timing; past L2 each of those reads comes
 * from L3 (shared, and several times slower), which no blocking gains back. */
static bool rule_b_block(const kern_variant *v, const kern_node *kn, const core_hw *hw,
                         const kern_config *c) {
    gemm_state s;
    int64_t rows, cols;
    if (!config_geometry(v, kn, c, &s, &rows, &cols)) return true;
    const int64_t nc = min64(s.blk.nc, cols);
    return (size_t)gemm_kc_max(&s.blk, s.kdim, 0) * (size_t)nc * sizeof(float) <= gemm_l2_bytes(hw);
}

/* The A block is read again once per B block of the thread's columns, and L2 holds B: so A
 * lives in L3, where each running thread has its share. Read only once (one B block), it may
 * be of any size. (Not "fits L2": with B there, the default's 960-row A blocks never would.) */
static bool rule_a_block(const kern_variant *v, const kern_node *kn, const core_hw *hw,
                         const kern_config *c) {
    gemm_state s;
    int64_t rows, cols;
    if (!config_geometry(v, kn, c, &s, &rows, &cols)) return true;
    if (s.blk.nc >= cols) return true;
    const size_t a =
        (size_t)min64(s.blk.mc, rows) * (size_t)gemm_kc_max(&s.blk, s.kdim, 0) * sizeof(float);
    return a <= gemm_l3_bytes(hw) / (size_t)s.threads;
}

/* Each thread's part of C holds at least one whole block: a larger MC or NC is cut to the part
 * by the driver, so it would run exactly like the part itself, which values() lists. */
static bool rule_block_per_thread(const kern_variant *v, const kern_node *kn, const core_hw *hw,
                                  const kern_config *c) {
    (void)hw;
    gemm_state s;
    int64_t rows, cols;
    if (!config_geometry(v, kn, c, &s, &rows, &cols)) return true;
    return s.blk.mc <= (rows + s.k->mr - 1) / s.k->mr * s.k->mr &&
           s.blk.nc <= (cols + s.k->nr - 1) / s.k->nr * s.k->nr;
}

/* ---- the variant table ------------------------------------------------------------------------
 * C has no closures, so each variant gets thin wrappers that pass its own descriptor. */

#define GEMM_VARIANT(ID, OP, NAME, NEEDS) GEMM_VARIANT_E(ID, OP, NAME, NEEDS, &gemm_emitter)
#define GEMM_VARIANT_E(ID, OP, NAME, NEEDS, EMIT)                                                  \
    static const kern_variant v_##ID;                                                              \
    static bool sup_##ID(const kern_node *kn, const core_hw *hw) {                                 \
        return supports_common(kn, hw, &v_##ID);                                                   \
    }                                                                                              \
    static size_t ws_##ID(const kern_node *kn) {                                                   \
        return workspace_common(&v_##ID, kn);                                                      \
    }                                                                                              \
    static anvil_status prep_##ID(const kern_node *kn, void **state) {                             \
        return prepare_common(&v_##ID, kn, state);                                                 \
    }                                                                                              \
    static int vals_##ID(const kern_node *kn, const core_hw *hw, int i, int32_t *vals, int cap) {  \
        return values_common(&v_##ID, kn, hw, i, vals, cap);                                       \
    }                                                                                              \
    static bool r1_##ID(const kern_node *kn, const core_hw *hw, const kern_config *c) {            \
        return rule_a_panel(&v_##ID, kn, hw, c);                                                   \
    }                                                                                              \
    static bool r2_##ID(const kern_node *kn, const core_hw *hw, const kern_config *c) {            \
        return rule_b_block(&v_##ID, kn, hw, c);                                                   \
    }                                                                                              \
    static bool r3_##ID(const kern_node *kn, const core_hw *hw, const kern_config *c) {            \
        return rule_a_block(&v_##ID, kn, hw, c);                                                   \
    }                                                                                              \
    static bool r4_##ID(const kern_node *kn, const core_hw *hw, const kern_config *c) {            \
        return rule_block_per_thread(&v_##ID, kn, hw, c);                                          \
    }                                                                                              \
    static const kern_rule rules_##ID[] = {{"A panel fits L1", r1_##ID},                           \
                                           {"B block fits L2", r2_##ID},                           \
                                           {"A block fits L3 share", r3_##ID},                     \
                                           {"a block per thread", r4_##ID}};                       \
    static const kern_space space_##ID = {3, {"kc", "mc", "nc"}, vals_##ID, NULL, rules_##ID, 4};  \
    static const kern_variant v_##ID = {NAME,         OP,          NEEDS,   sup_##ID,              \
                                        ws_##ID,      prep_##ID,   release, run_common,            \
                                        fuses_common, &space_##ID, EMIT,    bf16_io_common};

/* Per tile of gemm.h, the MatMul and the Gemm variant, named PREFIX "_<MR>x<NR>_<isa>" (bf16
 * tiles: PREFIX_BF16 "_<MR>x<NR>_<isa>"). */
#define TILE_VARIANTS(MR, NV, NR, ISA)                                                             \
    GEMM_VARIANT(mm_##MR##x##NR##_##ISA, IR_OP_MATMUL, PREFIX "_" #MR "x" #NR "_" #ISA,            \
                 GEMM_NEEDS_##ISA)                                                                 \
    GEMM_VARIANT(gm_##MR##x##NR##_##ISA, IR_OP_GEMM, PREFIX "_" #MR "x" #NR "_" #ISA,              \
                 GEMM_NEEDS_##ISA)

#define TILE_VARIANTS_BF16(MR, NV, NR, ISA)                                                        \
    GEMM_VARIANT(mm_##MR##x##NR##_##ISA, IR_OP_MATMUL, PREFIX_BF16 "_" #MR "x" #NR "_" #ISA,       \
                 GEMM_NEEDS_##ISA | KERN_ROUNDS_BF16)                                              \
    GEMM_VARIANT(gm_##MR##x##NR##_##ISA, IR_OP_GEMM, PREFIX_BF16 "_" #MR "x" #NR "_" #ISA,         \
                 GEMM_NEEDS_##ISA | KERN_ROUNDS_BF16)

/* fp16 tiles: PREFIX_FP16 "_<MR>x<NR>_<isa>" */
#define TILE_VARIANTS_FP16(MR, NV, NR, ISA)                                                        \
    GEMM_VARIANT(mm_##MR##x##NR##_##ISA, IR_OP_MATMUL, PREFIX_FP16 "_" #MR "x" #NR "_" #ISA,       \
                 GEMM_NEEDS_##ISA | KERN_ROUNDS_FP16)                                              \
    GEMM_VARIANT(gm_##MR##x##NR##_##ISA, IR_OP_GEMM, PREFIX_FP16 "_" #MR "x" #NR "_" #ISA,         \
                 GEMM_NEEDS_##ISA | KERN_ROUNDS_FP16)

GEMM_VARIANT(mm_auto, IR_OP_MATMUL, PREFIX, 0)
GEMM_VARIANT(gm_auto, IR_OP_GEMM, PREFIX, 0)
GEMM_TILES(TILE_VARIANTS)
GEMM_VARIANT(mm_bf16, IR_OP_MATMUL, PREFIX_BF16, GEMM_NEEDS_avx512bf16 | KERN_ROUNDS_BF16)
GEMM_VARIANT(gm_bf16, IR_OP_GEMM, PREFIX_BF16, GEMM_NEEDS_avx512bf16 | KERN_ROUNDS_BF16)
GEMM_TILES_AVX512BF16(TILE_VARIANTS_BF16)
GEMM_VARIANT(mm_fp16, IR_OP_MATMUL, PREFIX_FP16, GEMM_NEEDS_avx512fp16 | KERN_ROUNDS_FP16)
GEMM_VARIANT(gm_fp16, IR_OP_GEMM, PREFIX_FP16, GEMM_NEEDS_avx512fp16 | KERN_ROUNDS_FP16)
GEMM_TILES_AVX512FP16(TILE_VARIANTS_FP16)
/* The AMX tile, first where the CPU has it (eight times the bf16 multiplies of an AVX-512 tile per
 * cycle); not emitted (compile takes gemm_bf16's AVX-512 tile instead). */
GEMM_VARIANT_E(mm_amx, IR_OP_MATMUL, PREFIX_BF16 "_32x32_amx", GEMM_NEEDS_amx | KERN_ROUNDS_BF16,
               NULL)
GEMM_VARIANT_E(gm_amx, IR_OP_GEMM, PREFIX_BF16 "_32x32_amx", GEMM_NEEDS_amx | KERN_ROUNDS_BF16,
               NULL)

/* Per op the AMX tile, "gemm_bf16" and "gemm_fp16" (which only sessions accepting that format
 * see), "gemm_f32", then the tiles in gemm_kernels' order, the bf16 and the fp16 tiles. */
#define AUTO_REF(OPID) &v_##OPID##_bf16, &v_##OPID##_fp16, &v_##OPID##_auto,
#define MM_REF(MR, NV, NR, ISA) &v_mm_##MR##x##NR##_##ISA,
#define GM_REF(MR, NV, NR, ISA) &v_gm_##MR##x##NR##_##ISA,
const kern_variant *const kern_family_gemm[] = {
    &gemm_variant_i8_dynamic,
    &gemm_variant_i8_dynamic_gemm,
    &v_mm_amx,
    AUTO_REF(mm) GEMM_TILES(MM_REF) GEMM_TILES_AVX512BF16(MM_REF) GEMM_TILES_AVX512FP16(MM_REF) &
        v_gm_amx,
    AUTO_REF(gm) GEMM_TILES(GM_REF) GEMM_TILES_AVX512BF16(GM_REF) GEMM_TILES_AVX512FP16(GM_REF)
        NULL,
};
