/* Variants of anvil.LayerNormGrad (ops/train/grad.c defines the op and its reference kernel, the
 * oracle here). In a BERT training step (L4/H512, seq 128, batch 8, Zen 4) the reference's
 * scalar double loops took 17.5 ms of 920 over its 9 nodes; layernorm_grad_avx512 takes 2.5 ms
 * on 1 thread, 1.7 on 2.
 *
 *   layernorm_grad_avx512  the rows of ln_grad_avx512.c
 *   layernorm_grad_f32     the same passes as portable loops (8 double lanes as arrays, then a
 *                          float loop the compiler vectorizes), for any x86-64
 *
 * Threads split the rows into one contiguous range per part. dX is per row; dscale and dbias are
 * sums over every row: each part adds its rows into its own pair of float arrays in the
 * workspace (row after row, as the reference adds), and the parts are summed in part order at the
 * end, so a result depends on the thread count but never on the schedule.
 *
 * Every pointer argument is borrowed for the call. */
#include "grad.h"

#include "kernels/cpu/family.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this many values a node runs as one part: waking the pool costs more. */
#define LN_PAR_MIN ((size_t)16384)

typedef struct lng_plan {
    size_t rows, d;
    size_t stride; /* floats per part's column array in the workspace (d, rounded up to 16) */
    int parts;     /* at most this many parts (the session's threads) */
    float epsilon;
    bool avx512;
} lng_plan;

/* (dY, X, scale) float32 with static shapes, dY as X, scale of the normalized dims' d values */
static bool lng_plan_of(const kern_node *kn, bool avx512, lng_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const ir_node *n = kn->node;
    if (n->op != IR_OP_LAYERNORM_GRAD || kn->n_in < 3 || kn->n_out < 1) return false;
    const op_tinfo *dy = &kn->in[0], *x = &kn->in[1], *sc = &kn->in[2];
    if (!kfam_f32_static(dy) || !kfam_f32_static(x) || !kfam_f32_static(sc) ||
        !ir_shape_equal(&dy->shape, &x->shape))
        return false;
    int64_t axis;
    if (ir_attr_int(n, "axis", -1, &axis) != ANVIL_OK ||
        ir_attr_float(n, "epsilon", 1e-5f, &pl->epsilon) != ANVIL_OK) {
        core_err_clear();
        return false;
    }
    const int rank = x->shape.rank;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    pl->rows = 1;
    pl->d = 1;
    for (int i = 0; i < rank; i++) *(i < axis ? &pl->rows : &pl->d) *= (size_t)x->shape.d[i];
    if (pl->rows < 1 || pl->d < 1 || kfam_numel(&sc->shape) != pl->d) return false;
    pl->stride = (pl->d + 15) & ~(size_t)15;
    pl->parts = kn->threads > 0 ? kn->threads : 1;
    pl->avx512 = avx512;
    return true;
}

static bool lng_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    lng_plan pl;
    return lng_plan_of(kn, false, &pl);
}

/* Per part: its dscale and dbias sums. */
static size_t lng_workspace(const kern_node *kn) {
    lng_plan pl;
    if (!lng_plan_of(kn, false, &pl)) return 0;
    return (size_t)pl.parts * 2 * pl.stride * sizeof(float);
}

static anvil_status lng_prepare(const kern_node *kn, bool avx512, void **state) {
    lng_plan *pl = core_calloc(1, sizeof *pl);
    if (!pl) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!lng_plan_of(kn, avx512, pl)) {
        free(pl);
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: a layernorm_grad variant prepared for a node it does not take",
                        ir_node_label(kn->node));
    }
    *state = pl;
    return ANVIL_OK;
}

static anvil_status lng_prepare_avx512(const kern_node *kn, void **state) {
    return lng_prepare(kn, true, state);
}

static anvil_status lng_prepare_c(const kern_node *kn, void **state) {
    return lng_prepare(kn, false, state);
}

/* ---- the portable rows (the contract of train_ln_rows_avx512) -------------------------------- */

#define LANES 8

static void ln_rows_c(const grad_ln *p, size_t r0, size_t r1, float *restrict ds,
                      float *restrict db) {
    const size_t d = p->d, dv = d / LANES * LANES;
    const float *restrict sc = p->scale;
    for (size_t r = r0; r < r1; r++) {
        const float *restrict x = p->x + r * d, *restrict dy = p->dy + r * d;
        /* one pass in double, deviations from x[0] (see ln_grad_avx512.c) */
        const double x0 = x[0];
        double s[LANES] = {0}, q[LANES] = {0}, gs[LANES] = {0}, gd[LANES] = {0};
        for (size_t i = 0; i < dv; i += LANES)
            for (int l = 0; l < LANES; l++) {
                const double dev = x[i + l] - x0, g = dy[i + l] * sc[i + l];
                s[l] += dev;
                q[l] += dev * dev;
                gs[l] += g;
                gd[l] += g * dev;
            }
        for (size_t i = dv; i < d; i++) {
            const double dev = x[i] - x0, g = dy[i] * sc[i];
            s[i - dv] += dev;
            q[i - dv] += dev * dev;
            gs[i - dv] += g;
            gd[i - dv] += g * dev;
        }
        double ts = 0, tq = 0, tg = 0, tgd = 0;
        for (int l = 0; l < LANES; l++) {
            ts += s[l];
            tq += q[l];
            tg += gs[l];
            tgd += gd[l];
        }
        const double sd = ts / (double)d, gm = tg / (double)d, mean = x0 + sd;
        const double var = tq / (double)d - sd * sd;
        const double inv = 1.0 / sqrt((var > 0 ? var : 0) + (double)p->epsilon);
        const float mg = (float)gm, mgx = (float)(inv * (tgd / (double)d - sd * gm));
        const float iv = (float)inv;
        const float mh = (float)mean, ml = (float)(mean - (double)mh);
        if (p->dx) {
            float *restrict dx = p->dx + r * d;
            for (size_t i = 0; i < d; i++) {
                const float xh = ((x[i] - mh) - ml) * iv, g = dy[i] * sc[i];
                dx[i] = ((g - mg) - xh * mgx) * iv;
                ds[i] += dy[i] * xh;
                db[i] += dy[i];
            }
        } else {
            for (size_t i = 0; i < d; i++) {
                ds[i] += dy[i] * (((x[i] - mh) - ml) * iv);
                db[i] += dy[i];
            }
        }
    }
}

/* ---- run ------------------------------------------------------------------------------------- */

typedef struct lng_job {
    const lng_plan *pl;
    grad_ln p;
    float *acc; /* per part: stride floats of dscale, then of dbias */
    size_t parts;
} lng_job;

static void lng_range(void *arg, size_t begin, size_t end) {
    const lng_job *j = arg;
    const lng_plan *pl = j->pl;
    for (size_t part = begin; part < end; part++) {
        float *ds = j->acc + part * 2 * pl->stride, *db = ds + pl->stride;
        memset(ds, 0, 2 * pl->stride * sizeof(float));
        const size_t r0 = pl->rows * part / j->parts, r1 = pl->rows * (part + 1) / j->parts;
        if (pl->avx512)
            train_ln_rows_avx512(&j->p, r0, r1, ds, db);
        else
            ln_rows_c(&j->p, r0, r1, ds, db);
    }
}

static float *opt_out(op_tensor *const *out, int n_out, int i) {
    return i < n_out && out[i] ? out[i]->data : NULL;
}

static anvil_status lng_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    const lng_plan *pl = state;
    size_t parts = (size_t)op_ctx_threads(ctx);
    if (parts > (size_t)pl->parts) parts = (size_t)pl->parts;
    if (parts > pl->rows) parts = pl->rows;
    if (pl->rows * pl->d < LN_PAR_MIN) parts = 1;
    lng_job j = {.pl = pl,
                 .p = {.dy = in[0]->data,
                       .x = in[1]->data,
                       .scale = in[2]->data,
                       .dx = opt_out(out, n_out, 0),
                       .d = pl->d,
                       .epsilon = pl->epsilon},
                 .acc = ws,
                 .parts = parts};
    op_parallel_for(parts > 1 ? ctx : NULL, parts, lng_range, &j);
    /* the parts' column sums, in part order */
    for (int o = 1; o <= 2; o++) {
        float *dst = opt_out(out, n_out, o);
        if (!dst) continue;
        const float *a = j.acc + (size_t)(o - 1) * pl->stride;
        memcpy(dst, a, pl->d * sizeof(float));
        for (size_t part = 1; part < parts; part++) {
            const float *b = a + part * 2 * pl->stride;
            for (size_t i = 0; i < pl->d; i++) dst[i] += b[i];
        }
    }
    return ANVIL_OK;
}

/* ---- the variants ---------------------------------------------------------------------------- */

const kern_variant train_v_ln_grad_avx512 = {.name = "layernorm_grad_avx512",
                                             .op = IR_OP_LAYERNORM_GRAD,
                                             .needs = KERN_NEEDS_AVX512,
                                             .supports = lng_supports,
                                             .workspace_size = lng_workspace,
                                             .prepare = lng_prepare_avx512,
                                             .release = free,
                                             .run = lng_run};
const kern_variant train_v_ln_grad_f32 = {.name = "layernorm_grad_f32",
                                          .op = IR_OP_LAYERNORM_GRAD,
                                          .supports = lng_supports,
                                          .workspace_size = lng_workspace,
                                          .prepare = lng_prepare_c,
                                          .release = free,
                                          .run = lng_run};
