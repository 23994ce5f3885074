/* The deconv family: ConvTranspose (fp32, NCHW, 1-3 spatial dims, any groups, strides,
 * dilations, pads, output_padding and output_shape) on anvil's GEMM, and the family's list.
 *
 * Per image and group, the weights of the group as A [mg*K, cg] (A[m*K + t, c] = W[g*cg + c, m, t]:
 * unit row stride, packed once in prepare when W is constant) times a chunk of the input as
 * B [cg, positions] give a column buffer col [mg*K, positions] (K = kernel taps), which is then
 * scattered into the output (deconv_common.c). The chunks are whole runs of the first spatial
 * dim sized so that col stays in L2 between the GEMM that writes it and the scatter that reads it.
 *   deconv_direct_gemm   stride == kernel, dilation 1, no begin pad (2x2 stride-2 upsampling):
 *                        every output position gets at most one tap, so the scatter writes
 *                        col + bias straight into the output (no zero fill, no adds), and chunks
 *                        write disjoint outputs, so threads take whole chunks.
 *   deconv_gemm          everything else: the output starts as the bias and every chunk's col is
 *                        added into it; the threads share each chunk (the GEMM's own split, then
 *                        the scatter by output channel and output rows, so no two threads write
 *                        one element), or take whole (image, group) items when there are enough.
 * The list puts deconv_direct_gemm first: where it applies it does strictly less work. Both
 * offer the tuner the GEMM's register tile (deconv_space). */
#include "deconv.h"

#include "kernels/cpu/gemm/gemm.h"

#include <stdlib.h>
#include <string.h>

typedef enum deconv_kind { KIND_GEMM, KIND_DIRECT } deconv_kind;

typedef struct deconv_plan {
    deconv_geom g;
    deconv_kind kind;
    const gemm_kernel *k;
    gemm_blocking blk;
    int threads;
    bool batch_parallel;    /* KIND_GEMM: whole (image, group) items per thread */
    int64_t rows, chunks;   /* positions of the first spatial dim per chunk, chunks per item */
    int64_t inner;          /* input positions per position of the first dim */
    int64_t r;              /* GEMM rows: mg * K */
    size_t gemm_ws, col_ws; /* per-thread bytes, 64-aligned */
    size_t pa_ws; /* > 0: W (an input) packed once per run, group by group (PREPACK_GROUPS) */
} deconv_plan;

typedef struct deconv_state {
    deconv_plan p;
    gemm_packed *pa; /* one per group when W is constant, else NULL */
    const deconv_rows *rk;
} deconv_state;

/* The most groups whose weights an input W a run packs once (deconv_plan.pa_ws). */
#define PREPACK_GROUPS 16

/* Outputs below this many floats run on the calling thread (waking the pool costs more). */
#define DECONV_SERIAL_FLOATS 32768

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

static int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/* bf16: the GEMMs on a bf16 tile (deconv_*_bf16), whose own packers round W^T and X to bf16; the
 * tuner's tile parameter lists fp32 tiles, so these keep the bf16 default. */
static bool plan_of(const kern_node *kn, deconv_kind kind, bool bf16, deconv_plan *p) {
    memset(p, 0, sizeof *p);
    deconv_geom *g = &p->g;
    if (!deconv_geom_of(kn, g)) return false;
    if (kind == KIND_DIRECT && !deconv_geom_disjoint(g)) return false;
    const core_hw *hw = core_hw_get();
    p->kind = kind;
    p->threads = kn->threads > 0 ? kn->threads : 1;
    p->r = g->mg * g->k_size;
    p->inner = 1;
    for (int d = 1; d < g->nsp; d++) p->inner *= g->in[d];
    const int64_t in0 = g->in[0] > 0 ? g->in[0] : 1, inner = p->inner > 0 ? p->inner : 1;
    /* col [r, rows*inner] in half of L2, but at least 64 columns for the GEMM to work on */
    const int64_t target = (int64_t)(gemm_l2_bytes(hw) / 2 / sizeof(float));
    int64_t rows = target / (p->r * inner);
    if (rows * inner < 64) rows = ceil_div(64, inner);
    const int64_t items = g->n * g->group;
    if (kind == KIND_DIRECT && p->threads > 1 && items < 2 * p->threads) {
        /* the threads take whole chunks: make at least two per thread */
        int64_t want = ceil_div(2 * p->threads, items > 0 ? items : 1);
        if (rows > ceil_div(in0, want)) rows = ceil_div(in0, want);
    }
    if (rows > in0) rows = in0;
    if (rows < 1) rows = 1;
    p->rows = rows;
    p->chunks = ceil_div(in0, rows);
    p->batch_parallel = kind == KIND_GEMM && p->threads > 1 && items >= p->threads;
    const int64_t ncols = rows * inner, kdim = g->cg > 0 ? g->cg : 1;
    if ((double)p->r * (double)ncols * sizeof(float) > (double)((size_t)1 << 28)) return false;
    /* the tuner's tile, else the knob deconv_tile (ANVIL_DECONV_TILE, for experiments), else
     * the GEMM's default */
    const char *force = kern_knobs_of(kn)->deconv_tile;
    const gemm_kernel *f = gemm_kernel_of_param(kern_param(kn, 0), hw);
    if (!f && force[0]) f = gemm_kernel_find(force);
    if (bf16)
        p->k = gemm_kernel_default_bf16(p->r, ncols, kdim, hw);
    else
        p->k = f && gemm_kernel_usable(f, hw) ? f : gemm_kernel_default(p->r, ncols, kdim, hw);
    if (!p->k) return false;
    p->blk = gemm_blocking_for(kn, p->k, p->r, ncols, kdim, hw, 0, 0, 0);
    p->gemm_ws = align64(gemm_thread_workspace(p->k, &p->blk));
    p->col_ws = align64((size_t)p->r * (size_t)ncols * sizeof(float));
    /* A pair tile packs (and rounds) A itself, so weights that are an input (a training graph's
     * input gradient) were packed for every chunk of every image: once per run instead. */
    if (bf16 && !kn->in[1].value && items * p->chunks > 1 && g->group <= PREPACK_GROUPS)
        p->pa_ws = align64(gemm_packed_a_bytes(p->k, p->r, kdim)) * (size_t)g->group;
    return true;
}

/* Workspace: threads GEMM slices (contiguous, as gemm_run expects), then threads col slices
 * (only slice 0 is used when the threads share a chunk, but the size must not depend on it), then
 * the weights packed once per run (pa_ws). */
static size_t plan_workspace(const deconv_plan *p) {
    return (size_t)p->threads * (p->gemm_ws + p->col_ws) + p->pa_ws;
}

/* ---- prepare / release ------------------------------------------------------------------------
 */

static void state_release(void *state) {
    deconv_state *st = state;
    if (!st) return;
    if (st->pa)
        for (int64_t g = 0; g < st->p.g.group; g++) gemm_packed_free(&st->pa[g]);
    free(st->pa);
    free(st);
}

static anvil_status state_prepare(const kern_node *kn, deconv_kind kind, bool bf16, void **state) {
    deconv_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!plan_of(kn, kind, bf16, &st->p)) {
        free(st);
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: the deconv variant cannot run this node",
                        ir_node_label(kn->node));
    }
    st->rk = deconv_rows_for(core_hw_get());
    const deconv_geom *g = &st->p.g;
    const float *w = kn->in[1].value;
    if (w && g->cg > 0 && st->p.r > 0) {
        st->pa = core_calloc((size_t)g->group, sizeof *st->pa);
        if (!st->pa) {
            free(st);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
        for (int64_t grp = 0; grp < g->group; grp++) {
            anvil_status e = gemm_pack_a(st->p.k, st->p.r, g->cg, w + grp * g->cg * st->p.r, 1,
                                         st->p.r, &st->pa[grp]);
            if (e != ANVIL_OK) {
                state_release(st);
                return e;
            }
        }
        kern_node_mark_copied(kn, 1);
    }
    *state = st;
    return ANVIL_OK;
}

/* ---- run ------------------------------------------------------------------------------------ */

typedef struct deconv_job {
    const deconv_state *st;
    const gemm_packed *pa; /* W^T per group packed (in prepare or by this run), or NULL */
    const float *x, *w, *bias;
    float *y;
    char *ws;
    int64_t item; /* the item the shared-chunk steps work on */
    const float *col;
    int64_t r0, r1, ob; /* the chunk, and the output row blocks per channel */
} deconv_job;

static float bias_of(const deconv_job *j, int64_t ch) {
    return j->bias ? j->bias[ch] : 0.0f;
}

/* Output plane of channel m of item's group. */
static float *plane_of(const deconv_job *j, int64_t item, int64_t m) {
    const deconv_geom *g = &j->st->p.g;
    const int64_t img = item / g->group, grp = item % g->group;
    return j->y + (img * g->m + grp * g->mg + m) * g->out_size;
}

/* col = the GEMM of item's group over input rows [r0, r1) of the first dim. */
static void chunk_problem(const deconv_job *j, int64_t item, int64_t r0, int64_t r1, float *col,
                          gemm_problem *pr) {
    const deconv_plan *p = &j->st->p;
    const deconv_geom *g = &p->g;
    const int64_t img = item / g->group, grp = item % g->group;
    memset(pr, 0, sizeof *pr);
    pr->m = p->r;
    pr->n = (r1 - r0) * p->inner;
    pr->k = g->cg;
    if (j->pa) {
        pr->pa = &j->pa[grp];
    } else {
        pr->a = j->w + grp * g->cg * p->r;
        pr->rs_a = 1;
        pr->cs_a = p->r;
    }
    pr->b = j->x + (img * g->c + grp * g->cg) * g->in_size + r0 * p->inner;
    pr->rs_b = g->in_size;
    pr->cs_b = 1;
    pr->c = col;
    pr->ldc = pr->n;
    pr->ep = gemm_epilogue_none();
}

static void chunk_bounds(const deconv_plan *p, int64_t c, int64_t *r0, int64_t *r1) {
    *r0 = c * p->rows;
    *r1 = *r0 + p->rows < p->g.in[0] ? *r0 + p->rows : p->g.in[0];
}

/* One item entirely on this thread with workspace slice t (KIND_GEMM). */
static void item_serial(const deconv_job *j, int64_t item, size_t t) {
    const deconv_plan *p = &j->st->p;
    const deconv_geom *g = &p->g;
    void *gws = j->ws + t * p->gemm_ws;
    float *col = (float *)(j->ws + (size_t)p->threads * p->gemm_ws + t * p->col_ws);
    const int64_t grp = item % g->group;
    for (int64_t m = 0; m < g->mg; m++)
        deconv_fill_rows(g, 0, g->out[0], bias_of(j, grp * g->mg + m), plane_of(j, item, m));
    for (int64_t c = 0; c < p->chunks; c++) {
        int64_t r0, r1;
        chunk_bounds(p, c, &r0, &r1);
        gemm_problem pr;
        chunk_problem(j, item, r0, r1, col, &pr);
        gemm_run_serial(p->k, &p->blk, &pr, gws);
        for (int64_t m = 0; m < g->mg; m++)
            deconv_col2im_add(g, j->st->rk, col + m * g->k_size * pr.ldc, pr.ldc, r0, r1, 0,
                              g->out[0], plane_of(j, item, m));
    }
}

/* One index per thread: thread t runs its share of the items. */
static void items_chunk(void *arg, size_t begin, size_t end) {
    const deconv_job *j = arg;
    const int64_t items = j->st->p.g.n * j->st->p.g.group, T = j->st->p.threads;
    for (size_t t = begin; t < end; t++)
        for (int64_t i = items * (int64_t)t / T; i < items * ((int64_t)t + 1) / T; i++)
            item_serial(j, i, t);
}

/* Units of the shared steps: (output channel m, block b of output rows of the first dim). */
static void unit_rows(const deconv_job *j, size_t u, int64_t *m, int64_t *o0, int64_t *o1) {
    const int64_t out0 = j->st->p.g.out[0], b = (int64_t)u % j->ob;
    *m = (int64_t)u / j->ob;
    *o0 = out0 * b / j->ob;
    *o1 = out0 * (b + 1) / j->ob;
}

static void fill_units(void *arg, size_t begin, size_t end) {
    const deconv_job *j = arg;
    const deconv_geom *g = &j->st->p.g;
    for (size_t u = begin; u < end; u++) {
        int64_t m, o0, o1;
        unit_rows(j, u, &m, &o0, &o1);
        deconv_fill_rows(g, o0, o1, bias_of(j, j->item % g->group * g->mg + m),
                         plane_of(j, j->item, m));
    }
}

static void col2im_units(void *arg, size_t begin, size_t end) {
    const deconv_job *j = arg;
    const deconv_geom *g = &j->st->p.g;
    const int64_t ld = (j->r1 - j->r0) * j->st->p.inner;
    for (size_t u = begin; u < end; u++) {
        int64_t m, o0, o1;
        unit_rows(j, u, &m, &o0, &o1);
        deconv_col2im_add(g, j->st->rk, j->col + m * g->k_size * ld, ld, j->r0, j->r1, o0, o1,
                          plane_of(j, j->item, m));
    }
}

/* KIND_DIRECT: thread t runs its share of the (item, chunk) jobs, each writing its own rows. */
static void direct_chunk(void *arg, size_t begin, size_t end) {
    const deconv_job *j = arg;
    const deconv_plan *p = &j->st->p;
    const deconv_geom *g = &p->g;
    const int64_t jobs = g->n * g->group * p->chunks, T = p->threads;
    for (size_t t = begin; t < end; t++) {
        void *gws = j->ws + t * p->gemm_ws;
        float *col = (float *)(j->ws + (size_t)T * p->gemm_ws + t * p->col_ws);
        for (int64_t q = jobs * (int64_t)t / T; q < jobs * ((int64_t)t + 1) / T; q++) {
            const int64_t item = q / p->chunks, grp = item % g->group;
            int64_t r0, r1;
            chunk_bounds(p, q % p->chunks, &r0, &r1);
            gemm_problem pr;
            chunk_problem(j, item, r0, r1, col, &pr);
            gemm_run_serial(p->k, &p->blk, &pr, gws);
            for (int64_t m = 0; m < g->mg; m++)
                deconv_col2im_set(g, j->st->rk, col + m * g->k_size * pr.ldc, pr.ldc, r0, r1,
                                  bias_of(j, grp * g->mg + m), plane_of(j, item, m));
        }
    }
}

/* Planes (image, channel) that only get the bias: the uncovered margin of KIND_DIRECT, or
 * everything when there is no input to scatter. */
static void margin_planes(void *arg, size_t begin, size_t end) {
    const deconv_job *j = arg;
    const deconv_geom *g = &j->st->p.g;
    const bool all = g->cg == 0 || g->in_size == 0;
    for (size_t pl = begin; pl < end; pl++) {
        float *y = j->y + (int64_t)pl * g->out_size;
        float b = bias_of(j, (int64_t)pl % g->m);
        if (all)
            deconv_fill_rows(g, 0, g->out[0], b, y);
        else
            deconv_fill_uncovered(g, b, y);
    }
}

static anvil_status variant_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const deconv_state *st = state;
    const deconv_plan *p = &st->p;
    const deconv_geom *g = &p->g;
    deconv_job j;
    memset(&j, 0, sizeof j);
    j.st = st;
    j.x = in[0]->data;
    j.w = in[1]->data;
    j.bias = g->has_bias && n_in > 2 && in[2] ? in[2]->data : NULL;
    j.y = out[0]->data;
    j.ws = ws;
    const int64_t planes = g->n * g->m, items = g->n * g->group;
    if (planes == 0 || g->out_size == 0) return ANVIL_OK;
    j.pa = st->pa;
    gemm_packed once[PREPACK_GROUPS];
    if (!j.pa && p->pa_ws > 0 && g->cg > 0) {
        const size_t stride = p->pa_ws / (size_t)g->group;
        char *mem = (char *)ws + (size_t)p->threads * (p->gemm_ws + p->col_ws);
        for (int64_t grp = 0; grp < g->group; grp++)
            gemm_pack_a_into(p->k, p->r, g->cg, j.w + grp * g->cg * p->r, 1, p->r,
                             mem + (size_t)grp * stride, &once[grp]);
        j.pa = once;
    }
    /* never more threads than the workspace has slices for */
    op_ctx capped;
    if (ctx && op_ctx_threads(ctx) > p->threads) {
        capped = *ctx;
        capped.threads = p->threads;
        ctx = &capped;
    }
    const bool small = (double)planes * (double)g->out_size < DECONV_SERIAL_FLOATS;
    op_ctx *fill_ctx = small ? NULL : ctx;
    if (g->cg == 0 || g->in_size == 0) {
        op_parallel_for(fill_ctx, (size_t)planes, margin_planes, &j);
        return ANVIL_OK;
    }
    if (p->kind == KIND_DIRECT) {
        op_parallel_for(ctx, (size_t)p->threads, direct_chunk, &j);
        op_parallel_for(fill_ctx, (size_t)planes, margin_planes, &j);
        return ANVIL_OK;
    }
    if (p->batch_parallel) {
        op_parallel_for(ctx, (size_t)p->threads, items_chunk, &j);
        return ANVIL_OK;
    }
    const int T = op_ctx_threads(ctx);
    j.ob = g->mg >= 2 * T ? 1 : ceil_div(2 * T, g->mg);
    if (j.ob > g->out[0]) j.ob = g->out[0];
    const size_t units = (size_t)(g->mg * j.ob);
    float *col = (float *)((char *)ws + (size_t)p->threads * p->gemm_ws);
    for (int64_t item = 0; item < items; item++) {
        j.item = item;
        op_parallel_for(fill_ctx, units, fill_units, &j);
        for (int64_t c = 0; c < p->chunks; c++) {
            chunk_bounds(p, c, &j.r0, &j.r1);
            gemm_problem pr;
            chunk_problem(&j, item, j.r0, j.r1, col, &pr);
            gemm_run(p->k, &p->blk, &pr, ws, ctx);
            j.col = col;
            op_parallel_for(p->r * pr.n < DECONV_SERIAL_FLOATS ? NULL : ctx, units, col2im_units,
                            &j);
        }
    }
    return ANVIL_OK;
}

/* The tuner's parameter: the GEMM's register tile (1 + an index into gemm_kernels; 0: the
 * default). The cache blocking stays the GEMM's own: the chunks already fit col into L2. */
static int space_values(const kern_node *kn, const core_hw *hw, int i, int32_t *vals, int cap) {
    (void)kn;
    return i == 0 ? gemm_tile_values(hw, vals, cap) : 0;
}

static const char *space_label(int i, int32_t v) {
    return i == 0 ? gemm_tile_label(v) : NULL;
}

static const kern_space deconv_space = {1, {"tile"}, space_values, space_label, NULL, 0};

#define DECONV_VARIANT(ID, NAME, KIND, BF16, NEEDS, SPACE)                                         \
    static bool sup_##ID(const kern_node *kn, const core_hw *hw) {                                 \
        (void)hw;                                                                                  \
        deconv_plan p;                                                                             \
        return plan_of(kn, KIND, BF16, &p);                                                        \
    }                                                                                              \
    static size_t ws_##ID(const kern_node *kn) {                                                   \
        deconv_plan p;                                                                             \
        return plan_of(kn, KIND, BF16, &p) ? plan_workspace(&p) : 0;                               \
    }                                                                                              \
    static anvil_status prep_##ID(const kern_node *kn, void **state) {                             \
        return state_prepare(kn, KIND, BF16, state);                                               \
    }                                                                                              \
    static const kern_variant deconv_v_##ID = {                                                    \
        NAME,          IR_OP_CONVTRANSPOSE, NEEDS, sup_##ID, ws_##ID, prep_##ID,                   \
        state_release, variant_run,         NULL,  SPACE,    NULL,    NULL};

DECONV_VARIANT(direct, "deconv_direct_gemm", KIND_DIRECT, false, 0, &deconv_space)
DECONV_VARIANT(gemm, "deconv_gemm", KIND_GEMM, false, 0, &deconv_space)
/* The same on bf16 tiles, for sessions that accept bf16 (the backward-data of mixed-precision
 * training), each before its fp32 form so that a bf16 session's cascade takes it where bf16
 * measured faster (registry.c). */
#define DECONV_BF16_NEEDS (KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 | KERN_ROUNDS_BF16)
DECONV_VARIANT(direct_bf16, "deconv_direct_bf16", KIND_DIRECT, true, DECONV_BF16_NEEDS, NULL)
DECONV_VARIANT(gemm_bf16, "deconv_gemm_bf16", KIND_GEMM, true, DECONV_BF16_NEEDS, NULL)

/* deconv_batched_gemm first: its supports() takes only batches of small inputs, where one GEMM
 * over the batch beats a GEMM of a few columns per image (deconv_batched.c). */
extern const kern_variant deconv_v_batched, deconv_v_batched_bf16;
const kern_variant *const kern_family_deconv[] = {&deconv_v_batched_bf16,
                                                  &deconv_v_batched,
                                                  &deconv_v_direct_bf16,
                                                  &deconv_v_direct,
                                                  &deconv_v_gemm_bf16,
                                                  &deconv_v_gemm,
                                                  NULL};
