/* Variants of the batch-norm and max-pool training ops (ops/train/grad.c defines the ops and their
 * reference kernels, the oracle here). In a ResNet-18 training step (64x64, batch 16, 1 thread,
 * Zen 4) the references' scalar loops took 24 ms of 240 (a double add per value in the batch
 * norms, a branch per tap in MaxPoolGrad); these variants take 5.5 ms in steps after the first.
 *
 *   batchnorm_train_*  anvil.BatchNormTrain: the sums of X, then the squared deviations from the
 *                      float mean (two passes, as the reference: one pass of x and x^2 loses the
 *                      variance when the mean is large), then Y = X * a + c. The statistics and
 *                      running statistics from the sums as the reference forms them, in double.
 *   batchnorm_grad_*   anvil.BatchNormGrad: sum dY and sum dY (X - mean) in one pass, then
 *                      dX = a dY + b (X - mean) + c with the reference's factors.
 *   max_pool_grad_*    anvil.MaxPoolGrad per N x C plane (1-D and 2-D): dX zeroed, each window's
 *                      first largest input found again and its dY added there, windows in order.
 *
 * The batch norms take a unit of adjacent channels at a time (what 256 KiB of X holds, kept in L2
 * from one pass to the next) and go over it image by image (grad.h, grad_block). Channels of maps
 * under 16 values (ResNet-18's last stage: 2x2) are grouped 16 / area to a virtual channel when
 * area divides 16: one vector per image covers the group, where one channel alone would fill a
 * quarter of a vector. Threads split the units and the planes. The _avx512 variants call the
 * loops of bn_pool_grad_avx512.c; the _f32 ones the portable loops below, written for the
 * compiler to vectorize (16 lanes as arrays) on any x86-64.
 *
 * Every pointer argument is borrowed for the call. */
#include "grad.h"

#include "kernels/cpu/family.h"
#include "ops/nn_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LANES 16

/* ---- portable loops (the contract of grad.h's grad_bn_*_avx512) ------------------------------ */

enum { RED_SUM, RED_SQDEV, RED_DSUMS };

/* lane[l] = virtual channel v's parameter in lane l, from the per-channel values p */
static void lanes_c(const grad_block *b, const float *p, size_t v, float *lane) {
    const size_t ch = v * b->group;
    for (size_t l = 0; l < LANES; l++) {
        const size_t k = b->group == 1 ? v : ch + l / b->area;
        lane[l] = k < b->channels ? p[k] : 0.0f;
    }
}

/* One virtual channel's n floats of one image into its float lanes a (and c), those into s (and
 * t) in double when flush; the schedule of grad_bn_*_avx512 (CHUNK floats, `every` images).
 * Inlined into each caller so that the mode's branches leave the loops and they vectorize. */
#define CHUNK 1024

static inline __attribute__((always_inline)) void
red_vch_c(int mode, const float *restrict x, const float *restrict dy, size_t n, const float *m,
          float *restrict a, bool fresh, bool flush, double *s, double *t) {
    float *restrict c = a + LANES;
    if (fresh)
        for (int l = 0; l < 2 * LANES; l++) a[l] = 0.0f;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) {
            if (mode == RED_SUM) {
                a[l] += x[i + l];
            } else if (mode == RED_SQDEV) {
                const float d = x[i + l] - m[l];
                a[l] += d * d;
            } else {
                a[l] += dy[i + l];
                c[l] += dy[i + l] * (x[i + l] - m[l]);
            }
        }
    for (int l = 0; i < n; i++, l++) {
        if (mode == RED_SUM) {
            a[l] += x[i];
        } else if (mode == RED_SQDEV) {
            const float d = x[i] - m[l];
            a[l] += d * d;
        } else {
            a[l] += dy[i];
            c[l] += dy[i] * (x[i] - m[l]);
        }
    }
    if (flush)
        for (int l = 0; l < LANES; l++) {
            s[l] += a[l];
            if (mode == RED_DSUMS) t[l] += c[l];
        }
}

static inline __attribute__((always_inline)) void red_c(int mode, const grad_block *b,
                                                        const float *m, double *s, double *t) {
    const size_t vecs = (b->len + LANES - 1) / LANES, every = vecs >= 16 ? 1 : 16 / vecs;
    memset(s, 0, sizeof(double) * LANES * b->nv);
    if (t) memset(t, 0, sizeof(double) * LANES * b->nv);
    for (size_t q = 0; q < b->runs; q++) {
        const float *x = b->x + q * b->stride;
        const float *dy = mode == RED_DSUMS ? b->dy + q * b->stride : x;
        const bool fresh = q % every == 0, flush = (q + 1) % every == 0 || q + 1 == b->runs;
        for (size_t v = 0; v < b->nv; v++) {
            const size_t lo = v * b->len, hi = b->total - lo < b->len ? b->total : lo + b->len;
            float mv[LANES] = {0};
            if (m) lanes_c(b, m, v, mv);
            for (size_t c0 = lo; c0 < hi; c0 += CHUNK)
                red_vch_c(mode, x + c0, dy + c0, hi - c0 < CHUNK ? hi - c0 : CHUNK, mv,
                          b->acc + 2 * LANES * v, fresh, flush, s + LANES * v,
                          t ? t + LANES * v : NULL);
        }
    }
}

static void sum_c(const grad_block *b, double *s) {
    red_c(RED_SUM, b, NULL, s, NULL);
}

static void sqdev_c(const grad_block *b, const float *m, double *s) {
    red_c(RED_SQDEV, b, m, s, NULL);
}

static void dsums_c(const grad_block *b, const float *m, double *sdy, double *sdyx) {
    red_c(RED_DSUMS, b, m, sdy, sdyx);
}

static void affine_c(const grad_block *b, const float *a, const float *c) {
    for (size_t q = 0; q < b->runs; q++) {
        const float *restrict x = b->x + q * b->stride;
        float *restrict y = b->out + q * b->stride;
        for (size_t v = 0; v < b->nv; v++) {
            float av[LANES], cv[LANES];
            lanes_c(b, a, v, av);
            lanes_c(b, c, v, cv);
            const size_t lo = v * b->len, hi = b->total - lo < b->len ? b->total : lo + b->len;
            size_t i = lo;
            for (; i + LANES <= hi; i += LANES)
                for (int l = 0; l < LANES; l++) y[i + l] = x[i + l] * av[l] + cv[l];
            for (int l = 0; i < hi; i++, l++) y[i] = x[i] * av[l] + cv[l];
        }
    }
}

static void dx_c(const grad_block *b, const float *m, const float *a, const float *bb,
                 const float *c) {
    for (size_t q = 0; q < b->runs; q++) {
        const float *restrict x = b->x + q * b->stride, *restrict dy = b->dy + q * b->stride;
        float *restrict dx = b->out + q * b->stride;
        for (size_t v = 0; v < b->nv; v++) {
            float mv[LANES], av[LANES], bv[LANES], cv[LANES];
            lanes_c(b, m, v, mv);
            lanes_c(b, a, v, av);
            lanes_c(b, bb, v, bv);
            lanes_c(b, c, v, cv);
            const size_t lo = v * b->len, hi = b->total - lo < b->len ? b->total : lo + b->len;
            size_t i = lo;
            for (; i + LANES <= hi; i += LANES)
                for (int l = 0; l < LANES; l++)
                    dx[i + l] = av[l] * dy[i + l] + (bv[l] * (x[i + l] - mv[l]) + cv[l]);
            for (int l = 0; i < hi; i++, l++)
                dx[i] = av[l] * dy[i] + (bv[l] * (x[i] - mv[l]) + cv[l]);
        }
    }
}

typedef struct bn_loops {
    void (*sum)(const grad_block *b, double *s);
    void (*sqdev)(const grad_block *b, const float *m, double *s);
    void (*dsums)(const grad_block *b, const float *m, double *sdy, double *sdyx);
    void (*affine)(const grad_block *b, const float *a, const float *c);
    void (*dx)(const grad_block *b, const float *m, const float *a, const float *bb,
               const float *c);
} bn_loops;

static const bn_loops loops_avx512 = {train_bn_sum_avx512, train_bn_sqdev_avx512,
                                      train_bn_dsums_avx512, train_bn_affine_avx512,
                                      train_bn_dx_avx512};
static const bn_loops loops_c = {sum_c, sqdev_c, dsums_c, affine_c, dx_c};

/* ---- plans ----------------------------------------------------------------------------------- */

/* The values of the channels one unit of work holds, at most: the statistics read them once from
 * memory and the elementwise pass again from L2 (1 MiB on Zen 4). */
#define BLOCK_BYTES ((size_t)256 << 10)
/* and at most this many virtual channels, so that their float and double sums (384 bytes each)
 * stay in L1: BatchNormGrad of 16 x 512 x 2 x 2 took 14 us so, 24 us with 128 */
#define BLOCK_VCH 64

typedef struct bn_plan {
    int64_t n, c, area;
    int64_t group; /* channels per virtual channel: 16 / area when area divides 16, else 1 */
    size_t nv;     /* virtual channels */
    size_t block;  /* virtual channels per unit of work (cache), before the split by threads */
    float epsilon, momentum;
    const bn_loops *loops;
} bn_plan;

static bool per_channel(const op_tinfo *t, int64_t c) {
    return kfam_f32_static(t) && kfam_numel(&t->shape) == (size_t)c;
}

/* BatchNormTrain (X, scale, B, mean, var) and BatchNormGrad (dY, X, scale, mean, inv_std) with
 * static float32 shapes and per-channel vectors of C values; empty tensors stay with the
 * reference. */
static bool bn_plan_of(const kern_node *kn, const bn_loops *loops, bn_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const ir_node *n = kn->node;
    const bool train = n->op == IR_OP_BATCHNORM_TRAIN;
    if ((!train && n->op != IR_OP_BATCHNORM_GRAD) || kn->n_in < 5) return false;
    const op_tinfo *x = &kn->in[train ? 0 : 1];
    if (!kfam_f32_static(x) || x->shape.rank < 2) return false;
    if (!train && !(kfam_f32_static(&kn->in[0]) && ir_shape_equal(&kn->in[0].shape, &x->shape)))
        return false;
    pl->n = x->shape.d[0];
    pl->c = x->shape.d[1];
    pl->area = 1;
    for (int d = 2; d < x->shape.rank; d++) pl->area *= x->shape.d[d];
    if (pl->n < 1 || pl->c < 1 || pl->area < 1) return false;
    for (int i = train ? 1 : 2; i < 5; i++)
        if (!per_channel(&kn->in[i], pl->c)) return false;
    if (kn->n_out < 1 || kn->out[0].dtype != ANVIL_DTYPE_FLOAT32) return false;
    if (ir_attr_float(n, "epsilon", 1e-5f, &pl->epsilon) != ANVIL_OK ||
        ir_attr_float(n, "momentum", 0.9f, &pl->momentum) != ANVIL_OK) {
        core_err_clear();
        return false;
    }
    pl->group = pl->area < LANES && LANES % pl->area == 0 ? LANES / pl->area : 1;
    pl->nv = (size_t)((pl->c + pl->group - 1) / pl->group);
    const size_t bytes = (size_t)(pl->n * pl->group * pl->area) * sizeof(float) * (train ? 1 : 2);
    pl->block = bytes < BLOCK_BYTES ? BLOCK_BYTES / bytes : 1;
    if (pl->block > BLOCK_VCH) pl->block = BLOCK_VCH;
    pl->loops = loops;
    return true;
}

static bool bn_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    bn_plan pl;
    return bn_plan_of(kn, &loops_c, &pl);
}

/* The workspace: per virtual channel two arrays of 16 double sums and 32 floats of float sums;
 * per channel (and 16 more per virtual channel, where a unit's last group writes past its
 * channels) two double totals and three float factors. */
static size_t bn_workspace_of(const bn_plan *pl) {
    const size_t per_ch = (size_t)pl->c + LANES * pl->nv;
    return pl->nv * LANES * (2 * sizeof(double) + 2 * sizeof(float)) +
           per_ch * (2 * sizeof(double) + 3 * sizeof(float));
}

static size_t bn_workspace(const kern_node *kn) {
    bn_plan pl;
    return bn_plan_of(kn, &loops_c, &pl) ? bn_workspace_of(&pl) : 0;
}

static anvil_status bn_prepare(const kern_node *kn, const bn_loops *loops, void **state) {
    bn_plan *pl = core_calloc(1, sizeof *pl);
    if (!pl) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!bn_plan_of(kn, loops, pl)) {
        free(pl);
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: a batch-norm variant prepared for a node it does not take",
                        ir_node_label(kn->node));
    }
    *state = pl;
    return ANVIL_OK;
}

static anvil_status bn_prepare_avx512(const kern_node *kn, void **state) {
    return bn_prepare(kn, &loops_avx512, state);
}

static anvil_status bn_prepare_c(const kern_node *kn, void **state) {
    return bn_prepare(kn, &loops_c, state);
}

static float *opt_out(op_tensor *const *out, int n_out, int i) {
    return i < n_out && out[i] ? out[i]->data : NULL;
}

typedef struct bn_job {
    const bn_plan *pl;
    const float *x, *dy, *scale, *bias, *rm, *rv, *mean, *inv;
    float *y, *nrm, *nrv, *smean, *sinv, *dx, *dscale, *dbias;
    float *acc;          /* 32 per virtual channel */
    double *s, *t;       /* 16 per virtual channel */
    double *ts, *tt;     /* per channel, and 16 more per unit */
    float *fa, *fb, *fc; /* per channel, and 16 more per unit */
    size_t block;        /* virtual channels per unit */
} bn_job;

/* Virtual channel v's first channel */
static int64_t vch_first(const bn_plan *pl, size_t v) {
    return (int64_t)v * pl->group;
}

/* The block of virtual channels [v0, v1) */
static grad_block unit_block(const bn_job *j, size_t v0, size_t v1, const float *x, const float *dy,
                             float *out) {
    const bn_plan *pl = j->pl;
    const size_t off = (size_t)(vch_first(pl, v0) * pl->area);
    const int64_t end = vch_first(pl, v1) < pl->c ? vch_first(pl, v1) : pl->c;
    grad_block b = {x + off,
                    dy ? dy + off : NULL,
                    out ? out + off : NULL,
                    j->acc + 2 * LANES * v0,
                    (size_t)pl->n,
                    (size_t)(pl->c * pl->area),
                    v1 - v0,
                    (size_t)(pl->group * pl->area),
                    (size_t)((end - vch_first(pl, v0)) * pl->area),
                    (size_t)pl->group,
                    (size_t)pl->area,
                    (size_t)(end - vch_first(pl, v0))};
    return b;
}

/* tot[q] = the sum of lane sums s of channel q of a virtual channel (lanes past its values hold
 * 0; tot gets `group` entries): a tree over the 16 lanes of a single channel, where one chain of
 * adds would wait on each; with the group's area a constant (lane_groups), loops the compiler
 * unrolls. */
static inline __attribute__((always_inline)) void lane_groups(int area, const double *s,
                                                              double *tot) {
    for (int q = 0; q < LANES / area; q++) {
        double sum = 0.0;
        for (int l = q * area; l < (q + 1) * area; l++) sum += s[l];
        tot[q] = sum;
    }
}

static void lane_totals(const bn_plan *pl, const double *s, double *tot) {
    switch (pl->group) {
    case 1: {
        double h[8];
        for (int l = 0; l < 8; l++) h[l] = s[l] + s[l + 8];
        for (int l = 0; l < 4; l++) h[l] += h[l + 4];
        tot[0] = (h[0] + h[2]) + (h[1] + h[3]);
        return;
    }
    case 2:
        lane_groups(8, s, tot);
        return;
    case 4:
        lane_groups(4, s, tot);
        return;
    case 8:
        lane_groups(2, s, tot);
        return;
    default:
        for (int l = 0; l < LANES; l++) tot[l] = s[l];
    }
}

/* per-channel totals of the lane sums s of virtual channels [v0, v1), tot[0] for the first
 * channel (room for `group` - 1 past the last) */
static void block_totals(const bn_plan *pl, size_t v0, size_t v1, const double *s, double *tot) {
    for (size_t v = v0; v < v1; v++)
        lane_totals(pl, s + LANES * (v - v0), tot + (vch_first(pl, v) - vch_first(pl, v0)));
}

/* units [begin, end) of j->block virtual channels: each pass goes over all of them image by
 * image, the per-channel arithmetic between passes over all their channels at once */
static void bn_range(void *arg, size_t begin, size_t end) {
    const bn_job *j = arg;
    const bn_plan *pl = j->pl;
    const bn_loops *lp = pl->loops;
    const double count = (double)(pl->n * pl->area);
    for (size_t u = begin; u < end; u++) {
        const size_t v0 = u * j->block, v1 = v0 + j->block < pl->nv ? v0 + j->block : pl->nv;
        const int64_t ch0 = vch_first(pl, v0),
                      ch1 = vch_first(pl, v1) < pl->c ? vch_first(pl, v1) : pl->c;
        double *s = j->s + LANES * v0, *t = j->t + LANES * v0;
        /* per channel of the unit: totals, and factors as floats */
        double *ts = j->ts + ch0 + (int64_t)u * LANES, *tt = j->tt + ch0 + (int64_t)u * LANES;
        float *fa = j->fa + ch0 + (int64_t)u * LANES, *fb = j->fb + ch0 + (int64_t)u * LANES,
              *fc = j->fc + ch0 + (int64_t)u * LANES;
        if (!j->dy) {
            const grad_block b = unit_block(j, v0, v1, j->x, NULL, j->y);
            lp->sum(&b, s);
            block_totals(pl, v0, v1, s, ts);
            for (int64_t k = 0; k < ch1 - ch0; k++) fa[k] = (float)(ts[k] / count);
            lp->sqdev(&b, fa, t);
            block_totals(pl, v0, v1, t, tt);
            const float m = pl->momentum;
            for (int64_t q = 0; q < ch1 - ch0; q++) {
                const int64_t k = ch0 + q;
                const double mean = ts[q] / count;
                /* the deviations were taken from the float mean: remove count (mean - mean_f)^2 */
                const double dm = mean - (double)(float)mean;
                double s2 = tt[q] - count * dm * dm;
                if (s2 < 0) s2 = 0;
                const double var = s2 / count, inv = 1.0 / sqrt(var + pl->epsilon);
                fa[q] = (float)(j->scale[k] * inv);
                fc[q] = (float)(j->bias[k] - mean * fa[q]);
                const double unbiased = count > 1 ? s2 / (count - 1) : var;
                if (j->nrm) j->nrm[k] = j->rm[k] * m + (float)mean * (1.0f - m);
                if (j->nrv) j->nrv[k] = j->rv[k] * m + (float)unbiased * (1.0f - m);
                if (j->smean) j->smean[k] = (float)mean;
                if (j->sinv) j->sinv[k] = (float)inv;
            }
            lp->affine(&b, fa, fc);
            continue;
        }
        const grad_block b = unit_block(j, v0, v1, j->x, j->dy, j->dx);
        lp->dsums(&b, j->mean + ch0, s, t);
        block_totals(pl, v0, v1, s, ts);
        block_totals(pl, v0, v1, t, tt);
        for (int64_t q = 0; q < ch1 - ch0; q++) {
            const int64_t k = ch0 + q;
            const double inv = j->inv[k], sdy = ts[q], sdyx = tt[q] * inv;
            if (j->dscale) j->dscale[k] = (float)sdyx;
            if (j->dbias) j->dbias[k] = (float)sdy;
            /* the reference's kk * (M dY - sum dY - xhat sum(dY xhat)), xhat = (X - mean) * inv */
            const double kk = j->scale[k] * inv / count;
            fa[q] = (float)(kk * count);
            fb[q] = (float)(-kk * inv * sdyx);
            fc[q] = (float)(-kk * sdy);
        }
        if (j->dx) lp->dx(&b, j->mean + ch0, fa, fb, fc);
    }
}

/* Splits the virtual channels into units of at most pl->block, and at least one per thread
 * where there are enough. */
static void bn_go(bn_job *j, void *ws, op_ctx *ctx) {
    const bn_plan *pl = j->pl;
    const size_t nl = pl->nv * LANES, per_ch = (size_t)pl->c + LANES * pl->nv;
    double *d = ws;
    j->s = d;
    j->t = d + nl;
    j->ts = d + 2 * nl;
    j->tt = d + 2 * nl + per_ch;
    float *w = (float *)(d + 2 * nl + 2 * per_ch);
    j->acc = w;
    j->fa = w + 2 * nl;
    j->fb = w + 2 * nl + per_ch;
    j->fc = w + 2 * nl + 2 * per_ch;
    const size_t threads = (size_t)op_ctx_threads(ctx);
    const size_t per_thread = (pl->nv + threads - 1) / threads;
    j->block = pl->block < per_thread ? pl->block : per_thread;
    op_parallel_for(ctx, (pl->nv + j->block - 1) / j->block, bn_range, j);
}

static anvil_status bn_train_run(const ir_node *n, void *state, const op_tensor *const *in,
                                 int n_in, op_tensor *const *out, int n_out, void *ws,
                                 op_ctx *ctx) {
    (void)n;
    (void)n_in;
    bn_job j = {.pl = state,
                .x = in[0]->data,
                .scale = in[1]->data,
                .bias = in[2]->data,
                .rm = in[3]->data,
                .rv = in[4]->data,
                .y = out[0]->data,
                .nrm = opt_out(out, n_out, 1),
                .nrv = opt_out(out, n_out, 2),
                .smean = opt_out(out, n_out, 3),
                .sinv = opt_out(out, n_out, 4)};
    bn_go(&j, ws, ctx);
    return ANVIL_OK;
}

static anvil_status bn_grad_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    bn_job j = {.pl = state,
                .dy = in[0]->data,
                .x = in[1]->data,
                .scale = in[2]->data,
                .mean = in[3]->data,
                .inv = in[4]->data,
                .dx = opt_out(out, n_out, 0),
                .dscale = opt_out(out, n_out, 1),
                .dbias = opt_out(out, n_out, 2)};
    bn_go(&j, ws, ctx);
    return ANVIL_OK;
}

/* ---- MaxPoolGrad ----------------------------------------------------------------------------- */

typedef struct mpg_plan {
    grad_pool2d g;
    size_t planes;
    bool avx512;
} mpg_plan;

/* (dY, X) of a 1-D or 2-D pool whose plane indices fit int32 (the gather's lanes) */
static bool mpg_plan_of(const kern_node *kn, bool avx512, mpg_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const ir_node *n = kn->node;
    if (n->op != IR_OP_MAXPOOL_GRAD || kn->n_in < 2 || kn->n_out < 1) return false;
    const op_tinfo *dy = &kn->in[0], *x = &kn->in[1];
    if (!kfam_f32_static(dy) || !kfam_f32_static(x) || !kfam_f32_static(&kn->out[0]) ||
        !ir_shape_equal(&kn->out[0].shape, &x->shape))
        return false;
    const int rank = x->shape.rank, nsp = rank - 2;
    if ((nsp != 1 && nsp != 2) || dy->shape.rank != rank) return false;
    nn_window w;
    nn_geom g;
    if (nn_window_parse(n, true, true, true, &w) != ANVIL_OK || w.n_kernel != (size_t)nsp ||
        nn_window_resolve(n, &w, nsp, x->shape.d + 2, w.kernel, true, &g) != ANVIL_OK) {
        core_err_clear();
        return false;
    }
    /* the 2-D view: a 1-D pool is one row (H = 1) */
    const int w_ = nsp - 1;
    const int64_t ih = nsp == 2 ? g.in[0] : 1, oh = nsp == 2 ? g.out[0] : 1;
    const int64_t kh = nsp == 2 ? g.kernel[0] : 1, sh = nsp == 2 ? g.stride[0] : 1;
    const int64_t dh = nsp == 2 ? g.dil[0] : 1, ph = nsp == 2 ? g.pad_begin[0] : 0;
    const int64_t iw = g.in[w_], ow = g.out[w_], kw = g.kernel[w_], sw = g.stride[w_];
    const int64_t dw = g.dil[w_], pw = g.pad_begin[w_];
    /* the largest index a lane forms: a row's start plus a column of the last 16 outputs */
    if (ih * iw + (ow + 16) * sw + pw + kw * dw + (oh + 1) * sh + ph + kh * dh >= INT32_MAX)
        return false;
    pl->g =
        (grad_pool2d){(int32_t)ih, (int32_t)iw, (int32_t)oh, (int32_t)ow, (int32_t)kh, (int32_t)kw,
                      (int32_t)sh, (int32_t)sw, (int32_t)dh, (int32_t)dw, (int32_t)ph, (int32_t)pw};
    pl->planes = (size_t)(x->shape.d[0] * x->shape.d[1]);
    if (kfam_numel(&dy->shape) != pl->planes * (size_t)(oh * ow)) return false;
    pl->avx512 = avx512;
    return true;
}

static bool mpg_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    mpg_plan pl;
    return mpg_plan_of(kn, false, &pl);
}

static anvil_status mpg_prepare(const kern_node *kn, bool avx512, void **state) {
    mpg_plan *pl = core_calloc(1, sizeof *pl);
    if (!pl) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!mpg_plan_of(kn, avx512, pl)) {
        free(pl);
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: a max_pool_grad variant prepared for a node it "
                        "does not take",
                        ir_node_label(kn->node));
    }
    *state = pl;
    return ANVIL_OK;
}

static anvil_status mpg_prepare_avx512(const kern_node *kn, void **state) {
    return mpg_prepare(kn, true, state);
}

static anvil_status mpg_prepare_c(const kern_node *kn, void **state) {
    return mpg_prepare(kn, false, state);
}

/* The taps [*lo, *hi) of a window starting at s0 whose positions s0 + t * dil lie in [0, size) */
static void tap_range(int32_t s0, int32_t size, int32_t k, int32_t dil, int32_t *lo, int32_t *hi) {
    *lo = s0 >= 0 ? 0 : (-s0 + dil - 1) / dil;
    *hi = s0 >= size ? 0 : (size - 1 - s0) / dil + 1;
    if (*hi > k) *hi = k;
}

/* The portable plane: per window, the first valid tap, then strictly greater ones (the
 * reference's rule, NaN included: a NaN first tap stays, a later one never wins), as selects. */
static void mpg_plane_c(const grad_pool2d *g, const float *x, const float *dy, float *dx) {
    memset(dx, 0, sizeof(float) * (size_t)g->ih * (size_t)g->iw);
    for (int32_t oy = 0; oy < g->oh; oy++) {
        const int32_t y0 = oy * g->sh - g->ph;
        int32_t ky_lo, ky_hi;
        tap_range(y0, g->ih, g->kh, g->dh, &ky_lo, &ky_hi);
        for (int32_t ox = 0; ox < g->ow; ox++) {
            const int32_t x0 = ox * g->sw - g->pw;
            int32_t kx_lo, kx_hi;
            tap_range(x0, g->iw, g->kw, g->dw, &kx_lo, &kx_hi);
            if (ky_lo >= ky_hi || kx_lo >= kx_hi) continue;
            int32_t best = (y0 + ky_lo * g->dh) * g->iw + x0 + kx_lo * g->dw;
            float bv = x[best];
            for (int32_t ky = ky_lo; ky < ky_hi; ky++) {
                const int32_t row = (y0 + ky * g->dh) * g->iw + x0;
                for (int32_t kx = kx_lo; kx < kx_hi; kx++) {
                    const int32_t p = row + kx * g->dw;
                    const bool gt = x[p] > bv;
                    bv = gt ? x[p] : bv;
                    best = gt ? p : best;
                }
            }
            dx[best] += dy[oy * g->ow + ox];
        }
    }
}

typedef struct mpg_job {
    const mpg_plan *pl;
    const float *dy, *x;
    float *dx;
} mpg_job;

static void mpg_range(void *arg, size_t begin, size_t end) {
    const mpg_job *j = arg;
    const grad_pool2d *g = &j->pl->g;
    const size_t in = (size_t)g->ih * (size_t)g->iw, on = (size_t)g->oh * (size_t)g->ow;
    if (j->pl->avx512) {
        train_max_pool_planes_avx512(g, j->x + begin * in, j->dy + begin * on, j->dx + begin * in,
                                     end - begin);
        return;
    }
    for (size_t p = begin; p < end; p++)
        mpg_plane_c(g, j->x + p * in, j->dy + p * on, j->dx + p * in);
}

static anvil_status mpg_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    (void)ws;
    const mpg_plan *pl = state;
    mpg_job j = {pl, in[0]->data, in[1]->data, out[0]->data};
    op_parallel_for(ctx, pl->planes, mpg_range, &j);
    return ANVIL_OK;
}

/* ---- the variants ---------------------------------------------------------------------------- */

const kern_variant train_v_bn_train_avx512 = {.name = "batchnorm_train_avx512",
                                              .op = IR_OP_BATCHNORM_TRAIN,
                                              .needs = KERN_NEEDS_AVX512,
                                              .supports = bn_supports,
                                              .workspace_size = bn_workspace,
                                              .prepare = bn_prepare_avx512,
                                              .release = free,
                                              .run = bn_train_run};
const kern_variant train_v_bn_train_f32 = {.name = "batchnorm_train_f32",
                                           .op = IR_OP_BATCHNORM_TRAIN,
                                           .supports = bn_supports,
                                           .workspace_size = bn_workspace,
                                           .prepare = bn_prepare_c,
                                           .release = free,
                                           .run = bn_train_run};
const kern_variant train_v_bn_grad_avx512 = {.name = "batchnorm_grad_avx512",
                                             .op = IR_OP_BATCHNORM_GRAD,
                                             .needs = KERN_NEEDS_AVX512,
                                             .supports = bn_supports,
                                             .workspace_size = bn_workspace,
                                             .prepare = bn_prepare_avx512,
                                             .release = free,
                                             .run = bn_grad_run};
const kern_variant train_v_bn_grad_f32 = {.name = "batchnorm_grad_f32",
                                          .op = IR_OP_BATCHNORM_GRAD,
                                          .supports = bn_supports,
                                          .workspace_size = bn_workspace,
                                          .prepare = bn_prepare_c,
                                          .release = free,
                                          .run = bn_grad_run};
const kern_variant train_v_max_pool_grad_avx512 = {.name = "max_pool_grad_avx512",
                                                   .op = IR_OP_MAXPOOL_GRAD,
                                                   .needs = KERN_NEEDS_AVX512,
                                                   .supports = mpg_supports,
                                                   .prepare = mpg_prepare_avx512,
                                                   .release = free,
                                                   .run = mpg_run};
const kern_variant train_v_max_pool_grad_f32 = {.name = "max_pool_grad_f32",
                                                .op = IR_OP_MAXPOOL_GRAD,
                                                .supports = mpg_supports,
                                                .prepare = mpg_prepare_c,
                                                .release = free,
                                                .run = mpg_run};
