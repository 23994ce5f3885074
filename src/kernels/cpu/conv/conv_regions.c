/* Convolutions whose taps mostly read padding, as GEMMs over output regions that skip those taps:
 * variants "conv_nhwc_regions" (Conv, NCHW, transposed in and out like conv_nhwc_im2col_gemm)
 * and "convnhwc_regions" (anvil.ConvNhwc).
 *
 * A dilated 3x3 conv on a small map (DeepLabV3's ASPP: rate 12 on a 14x14 map) reads the padding
 * with most of its taps: along each dim the outer taps are inside the image for 2 of 14 outputs,
 * so only 18% of the (pixel, tap) products are not multiplications by zero. crop_taps removes a
 * tap only when it never reads the image; here each tap is skipped where it does not. Along each
 * dim the outputs fall into runs that see the same set of valid taps (at most 2k + 1 runs for
 * k taps), and the product of a row run and a column run is a region: one GEMM whose A is a
 * pointer table over the region's pixels and its valid taps only (gemm_problem.a_ind), and whose
 * B is those taps' rows of the weights, packed once per region. A region as wide as the output
 * writes Y in place; a narrower one writes a scratch block that is copied into its rows.
 * ASPP's rate-12 conv: 867 MFLOP run as 159.
 *
 * Each region packs its own copy of its taps' weights, and a region of few pixels streams them
 * for little work: ASPP's 9 regions read 25 taps' weights (12 MB in bf16 at 960 -> 256 channels)
 * for 196 pixels. Where the regions would read at least twice the taps the conv has, the plan is
 * by tap instead (conv_regions_plan.by_tap): one GEMM per tap over the rectangle of outputs it
 * reaches (the centre tap's is the whole output), each tap's weights read once, the products
 * summed into Y. By region, ASPP's conv took 1237 us in bf16 on one Zen 5 core (OpenVINO 613).
 *
 * Applies where at most REGIONS_DENSITY of the products are real (else the ordinary GEMM, with
 * one K for all pixels, is the better shape), with one group, every region seeing a tap, and at
 * most REGIONS_MAX regions; by region, B's packed copies take up to (2k+1)^2 / k^2 times the
 * weights on adversarial shapes (by tap, never more than once). A fused activation runs in each
 * region's epilogue (by tap, over Y once the taps are summed); a residual is left to the runtime
 * (fuses is false then). */
#include "conv.h"

#include "kernels/fusion.h"
#include "kernels/cpu/eltwise/eltwise.h"

#include <stdlib.h>
#include <string.h>

#define REGIONS_MAX_K 16
#define REGIONS_RUNS (2 * REGIONS_MAX_K + 2)
#define REGIONS_MAX CONV_REGIONS_MAX
#define REGIONS_DENSITY 0.7

/* The plan (conv_regions_plan) is plain data in conv_layout.h, with the run (conv_regions_run)
 * that the runtime and the libraries `anvil compile` emits share. */
typedef conv_region region;
typedef conv_regions_plan regions_plan;

typedef struct regions_state {
    regions_plan p;
    const ir_fusion *fusion; /* applied in the epilogues (NULL: none, or the runtime does) */
} regions_state;

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

/* Splits outputs [0, o) along one dim into runs with one set of valid taps (bit t: tap t reads
 * inside [0, in)). lo[i], mask[i] for run i, lo[n] = o; returns n. */
static int runs_of(int64_t o, int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pad,
                   int64_t *lo, uint32_t *mask, int64_t *valid) {
    int n = 0;
    *valid = 0;
    for (int64_t i = 0; i < o; i++) {
        uint32_t m = 0;
        for (int64_t t = 0; t < k; t++) {
            const int64_t pos = i * stride - pad + t * dil;
            if (pos >= 0 && pos < in) {
                m |= 1u << t;
                (*valid)++;
            }
        }
        if (n == 0 || mask[n - 1] != m) {
            if (n == REGIONS_RUNS - 1) return -1;
            lo[n] = i;
            mask[n++] = m;
        }
    }
    lo[n] = o;
    return n;
}

/* The rectangle of outputs [lo, hi) along one dim for which tap t reads inside [0, in). */
static void tap_range(int64_t o, int64_t in, int64_t stride, int64_t dil, int64_t pad, int64_t t,
                      int64_t *lo, int64_t *hi) {
    *lo = o;
    *hi = 0;
    for (int64_t i = 0; i < o; i++) {
        const int64_t pos = i * stride - pad + t * dil;
        if (pos >= 0 && pos < in) {
            *lo = i < *lo ? i : *lo;
            *hi = i + 1;
        }
    }
}

/* Whether the plan goes by tap: the regions would read at least twice as many taps' weights
 * as the conv has taps that ever read the image, and those taps fit the plan. */
static bool by_tap_worth(const uint32_t *ym, int ny, const uint32_t *xm, int nx) {
    uint32_t yall = 0, xall = 0;
    int64_t by_region = 0;
    for (int a = 0; a < ny; a++) yall |= ym[a];
    for (int b = 0; b < nx; b++) xall |= xm[b];
    for (int a = 0; a < ny; a++)
        for (int b = 0; b < nx; b++)
            by_region += __builtin_popcount(ym[a]) * __builtin_popcount(xm[b]);
    const int64_t taps = (int64_t)__builtin_popcount(yall) * __builtin_popcount(xall);
    return taps <= REGIONS_MAX && by_region >= 2 * taps;
}

/* The entries of a by-tap plan: every tap that reads the image, over its rectangle, the one
 * covering the whole output (if any) first. */
static void tap_entries(const conv_shape *s, regions_plan *p) {
    for (int64_t ky = 0; ky < s->kh; ky++)
        for (int64_t kx = 0; kx < s->kw; kx++) {
            int64_t y0, y1, x0, x1;
            tap_range(s->oh, s->h, s->sh, s->dh, s->pt, ky, &y0, &y1);
            tap_range(s->ow, s->w, s->sw, s->dw, s->pl, kx, &x0, &x1);
            if (y0 >= y1 || x0 >= x1) continue;
            region *r = &p->r[p->n++];
            *r = (region){.y0 = y0, .y1 = y1, .x0 = x0, .x1 = x1, .n_taps = 1};
            r->ym = 1u << ky;
            r->xm = 1u << kx;
            if (y0 == 0 && y1 == s->oh && x0 == 0 && x1 == s->ow) {
                const region first = *r;
                *r = p->r[0];
                p->r[0] = first;
            }
        }
}

/* bf16: the GEMMs on a bf16 tile (conv_nhwc_regions_bf16, convnhwc_regions_bf16), whose indirect
 * A needs segments (the channels of one tap) of an even length (gemm_takes_ind). */
static bool plan_of(const kern_node *kn, bool bf16, regions_plan *p) {
    memset(p, 0, sizeof *p);
    p->last = kn->node->op == IR_OP_CONV_NHWC;
    conv_shape *s = &p->s;
    if (!(p->last ? conv_shape_of_nhwc(kn, s) : conv_shape_of(kn, s)) || !kn->in[1].value)
        return false;
    if (s->group != 1 || s->kh > REGIONS_MAX_K || s->kw > REGIONS_MAX_K || s->kh * s->kw < 2 ||
        s->oh <= 0 || s->ow <= 0 || s->mg <= 0)
        return false;
    int64_t ylo[REGIONS_RUNS], xlo[REGIONS_RUNS], vy, vx;
    uint32_t ym[REGIONS_RUNS], xm[REGIONS_RUNS];
    const int ny = runs_of(s->oh, s->h, s->kh, s->sh, s->dh, s->pt, ylo, ym, &vy);
    const int nx = runs_of(s->ow, s->w, s->kw, s->sw, s->dw, s->pl, xlo, xm, &vx);
    if (ny < 1 || nx < 1 || ny * nx > REGIONS_MAX) return false;
    const double density =
        (double)vy / (double)(s->oh * s->kh) * (double)vx / (double)(s->ow * s->kw);
    if (density > REGIONS_DENSITY) return false;
    p->by_tap = by_tap_worth(ym, ny, xm, nx);
    const core_hw *hw = core_hw_get();
    if (bf16) {
        p->k = gemm_kernel_default_bf16(s->oh * s->ow, s->mg, conv_kdim(s), hw);
        if (!p->k || !gemm_takes_ind(p->k, s->cg)) return false;
    } else {
        const gemm_kernel *tile = conv_config_tile(kn, hw);
        p->k = tile ? tile : gemm_kernel_default(s->oh * s->ow, s->mg, conv_kdim(s), hw);
    }
    p->threads = kn->threads > 0 ? kn->threads : 1;
    size_t table = 0, block = 0, gws = 0;
    if (p->by_tap) tap_entries(s, p);
    for (int a = 0; !p->by_tap && a < ny; a++)
        for (int b = 0; b < nx; b++) {
            region *r = &p->r[p->n++];
            r->y0 = ylo[a], r->y1 = ylo[a + 1], r->x0 = xlo[b], r->x1 = xlo[b + 1];
            r->ym = ym[a];
            r->xm = xm[b];
            r->n_taps = __builtin_popcount(ym[a]) * __builtin_popcount(xm[b]);
        }
    for (int i = 0; i < p->n; i++) {
        region *r = &p->r[i];
        /* a region that no tap reaches is bias and activation alone: not handled here */
        if (r->n_taps == 0) return false;
        const int64_t pix = (r->y1 - r->y0) * (r->x1 - r->x0), kdim = r->n_taps * s->cg;
        r->blk = gemm_blocking_for(kn, p->k, pix, s->mg, kdim, hw, 0, 0, 0);
        const size_t t = (size_t)(pix * r->n_taps) * sizeof(const float *);
        table = table > t ? table : t;
        /* a narrow region, and by tap every entry but one that covers Y, go through the block */
        if (r->x1 - r->x0 < s->ow || (p->by_tap && (i > 0 || pix < s->oh * s->ow))) {
            const size_t c = (size_t)(pix * s->mg) * sizeof(float);
            block = block > c ? block : c;
        }
        const size_t g = gemm_thread_workspace(p->k, &r->blk);
        gws = gws > g ? gws : g;
    }
    p->table_bytes = align64(table);
    p->block_bytes = align64(block);
    p->gemm_bytes = (size_t)p->threads * align64(gws);
    if (!p->last) {
        p->xt_bytes = align64((size_t)(s->n * s->c * s->h * s->w) * sizeof(float));
        p->yt_bytes = align64((size_t)(s->n * s->m * s->oh * s->ow) * sizeof(float));
    }
    return true;
}

static bool regions_supports_as(const kern_node *kn, bool bf16) {
    regions_plan p;
    return plan_of(kn, bf16, &p);
}

static size_t regions_ws_as(const kern_node *kn, bool bf16) {
    regions_plan p;
    return plan_of(kn, bf16, &p)
               ? p.xt_bytes + p.yt_bytes + p.gemm_bytes + p.table_bytes + p.block_bytes
               : 0;
}

static bool regions_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return regions_supports_as(kn, false);
}

static bool regions_supports_bf16(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return regions_supports_as(kn, true);
}

static size_t regions_ws(const kern_node *kn) {
    return regions_ws_as(kn, false);
}

static size_t regions_ws_bf16(const kern_node *kn) {
    return regions_ws_as(kn, true);
}

/* The runtime applies a residual after run; activations run in the epilogues. */
static bool regions_fuses(const kern_node *kn) {
    const ir_fusion *f = kn->node->fusion;
    return conv_fuses(kn) && (!f || f->residual < 0);
}

static void regions_release(void *state) {
    regions_state *st = state;
    if (!st) return;
    for (int i = 0; i < st->p.n; i++) gemm_packed_free(&st->p.r[i].pb);
    free(st);
}

static anvil_status regions_prepare_as(const kern_node *kn, bool bf16, void **state) {
    regions_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!plan_of(kn, bf16, &st->p)) {
        free(st);
        return conv_prepare_unsupported(kn, "conv regions variant");
    }
    const conv_shape *s = &st->p.s;
    const float *w = kn->in[1].value;
    const int64_t khw = s->kh * s->kw;
    float *tmp = malloc(sizeof(float) * (size_t)(khw * s->cg * s->mg));
    anvil_status e = tmp ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < st->p.n && e == ANVIL_OK; i++) {
        region *r = &st->p.r[i];
        int64_t t = 0; /* the tap's place among the region's, in the order run_image lists them */
        for (int64_t ky = 0; ky < s->kh; ky++)
            for (int64_t kx = 0; kx < s->kw; kx++) {
                if (!(r->ym >> ky & r->xm >> kx & 1)) continue;
                for (int64_t ci = 0; ci < s->cg; ci++)
                    for (int64_t o = 0; o < s->mg; o++)
                        tmp[(t * s->cg + ci) * s->mg + o] =
                            w[(o * s->cg + ci) * khw + ky * s->kw + kx];
                t++;
            }
        e = gemm_pack_b(st->p.k, r->n_taps * s->cg, s->mg, tmp, s->mg, 1, &r->pb);
    }
    free(tmp);
    if (e != ANVIL_OK) {
        regions_release(st);
        return e;
    }
    kern_node_mark_copied(kn, 1);
    st->fusion = regions_fuses(kn) ? kn->node->fusion : NULL;
    *state = st;
    return ANVIL_OK;
}

static anvil_status regions_prepare(const kern_node *kn, void **state) {
    return regions_prepare_as(kn, false, state);
}

static anvil_status regions_prepare_bf16(const kern_node *kn, void **state) {
    return regions_prepare_as(kn, true, state);
}

static anvil_status regions_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const regions_state *st = state;
    const gemm_epilogue ep = kern_fusion_epilogue(st->fusion);
    conv_regions_run(&st->p, &ep, elt_transpose_f32, in[0]->data, conv_bias(&st->p.s, in, n_in),
                     out[0]->data, ws, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The plan as an initializer, each region's packed B as a blob, and a conv_regions_run call: the
 * very code regions_run runs, but for the transposes (a plain loop instead of the eltwise
 * family's, which the emitted library does not ship: the same floats moved). */

static anvil_status regions_emit(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    const regions_state *st = state;
    const regions_plan *p = &st->p;
    CORE_TRY(conv_emit_files_need(e));
    e->code(e, "conv_regions_plan rp;\nmemset(&rp, 0, sizeof rp);\n");
    conv_emit_shape(e, "rp.s", &p->s);
    conv_emit_tile(e, p->k);
    e->code(e,
            "rp.last = %s;\nrp.by_tap = %s;\nrp.threads = %d;\nrp.n = %d;\nrp.k = "
            "&gemm_kernel_%s;\n",
            p->last ? "true" : "false", p->by_tap ? "true" : "false", p->threads, p->n, p->k->name);
    e->code(e,
            "rp.xt_bytes = %zu;\nrp.yt_bytes = %zu;\nrp.gemm_bytes = %zu;\nrp.table_bytes = "
            "%zu;\nrp.block_bytes = %zu;\n",
            p->xt_bytes, p->yt_bytes, p->gemm_bytes, p->table_bytes, p->block_bytes);
    for (int i = 0; i < p->n; i++) {
        const region *r = &p->r[i];
        const size_t floats = (size_t)((r->pb.cols + p->k->nr - 1) / p->k->nr * p->k->nr) *
                              (size_t)gemm_slots(p->k, r->pb.rows);
        char blob[96];
        CORE_TRY(e->blob(e, r->pb.data, floats * sizeof(float), blob, sizeof blob));
        e->code(e,
                "rp.r[%d] = (conv_region){%lld, %lld, %lld, %lld, %uu, %uu, %d, {%lld, %lld, "
                "%lld}, {rp.k, %lld, %lld, (float *)(%s)}};\n",
                i, (long long)r->y0, (long long)r->y1, (long long)r->x0, (long long)r->x1,
                (unsigned)r->ym, (unsigned)r->xm, r->n_taps, (long long)r->blk.mc,
                (long long)r->blk.kc, (long long)r->blk.nc, (long long)r->pb.rows,
                (long long)r->pb.cols, blob);
    }
    const gemm_epilogue act = kern_fusion_epilogue(st->fusion);
    kern_emit_epilogue(e, "ep", &act, NULL, NULL, NULL);
    char x[96], b[96];
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, p->s.has_bias ? 2 : -1, b, sizeof b);
    e->code(e,
            "conv_regions_run(&rp, &ep, conv_transpose_rows_plain, (const float *)(%s), "
            "(const float *)(%s), (float *)(%s), %s, %s);\n",
            x, b, e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static const kern_emitter regions_emitter = {regions_emit, NULL};

const kern_variant conv_v_regions = {"conv_nhwc_regions",
                                     IR_OP_CONV,
                                     0,
                                     regions_supports,
                                     regions_ws,
                                     regions_prepare,
                                     regions_release,
                                     regions_run,
                                     regions_fuses,
                                     NULL,
                                     &regions_emitter,
                                     NULL};

const kern_variant conv_nhwc_v_regions = {"convnhwc_regions",
                                          IR_OP_CONV_NHWC,
                                          0,
                                          regions_supports,
                                          regions_ws,
                                          regions_prepare,
                                          regions_release,
                                          regions_run,
                                          regions_fuses,
                                          NULL,
                                          &regions_emitter,
                                          NULL};

/* The same GEMMs on bf16 tiles, for sessions that accept bf16. DeepLabV3's ASPP rate-12 conv
 * (256 channels, 14x14), 1 thread, Zen 4: see conv_variants.c's cascade. */
#define REGIONS_BF16_NEEDS (KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 | KERN_ROUNDS_BF16)
const kern_variant conv_v_regions_bf16 = {"conv_nhwc_regions_bf16",
                                          IR_OP_CONV,
                                          REGIONS_BF16_NEEDS,
                                          regions_supports_bf16,
                                          regions_ws_bf16,
                                          regions_prepare_bf16,
                                          regions_release,
                                          regions_run,
                                          regions_fuses,
                                          NULL,
                                          &regions_emitter,
                                          NULL};

const kern_variant conv_nhwc_v_regions_bf16 = {"convnhwc_regions_bf16", IR_OP_CONV_NHWC,
                                               REGIONS_BF16_NEEDS,      regions_supports_bf16,
                                               regions_ws_bf16,         regions_prepare_bf16,
                                               regions_release,         regions_run,
                                               regions_fuses,           NULL,
                                               &regions_emitter,        NULL};
