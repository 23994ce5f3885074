/* The reduce family's normalizations: InstanceNormalization, GroupNormalization (opset 18: one
 * scale and bias per group; 21: per channel), RMSNormalization and LpNormalization, fp32 with
 * static shapes, as "<op>_avx512" / "<op>_avx2" variants.
 *
 * Instance and Group normalize rows of contiguous elements ((n, c) planes, or (n, g) runs of C/G
 * planes) like the reference: the mean, then the mean square deviation from it (a second pass:
 * E[x^2] - E[x]^2 cancels badly), then y = (x - mean) * (inv * scale) + bias per channel, with
 * inv = 1 / sqrt(var + eps) in double. The reference accumulates in double; here the sums are
 * fp32 vector accumulators added in double per few thousand elements. RMS takes scale with one
 * element per normalized element (its usual [D] over the last axis); other broadcasts stay with
 * the reference, as do LayerNormalization's (the eltwise family's) and every other dtype. */
#include "reduce.h"
#include "kernels/cpu/family.h"

#include <math.h>
#include <stdlib.h>

#define RED_PAR_MIN ((size_t)1 << 15)
#define COL_BLOCK ((size_t)256)

typedef enum norm_kind { N_INSTANCE, N_GROUP, N_RMS, N_LP } norm_kind;

typedef struct norm_state {
    const red_isa *isa;
    norm_kind kind;
    float eps;
    size_t rows, blk;        /* Instance / Group / RMS: rows of blk contiguous elements */
    size_t channels, groups; /* Instance / Group (Instance: groups == channels) */
    size_t spatial;
    bool per_channel;         /* Group at opset >= 21, and Instance */
    int64_t p;                /* Lp: 1 or 2 */
    size_t outer, len, inner; /* Lp: the view of its axis */
} norm_state;

static norm_kind kind_of(ir_op op) {
    switch (op) {
    case IR_OP_INSTANCENORMALIZATION:
        return N_INSTANCE;
    case IR_OP_GROUPNORMALIZATION:
        return N_GROUP;
    case IR_OP_RMSNORMALIZATION:
        return N_RMS;
    default:
        return N_LP;
    }
}

/* The node's geometry, or false when this file does not take it. */
static bool norm_form(const kern_node *kn, norm_state *s) {
    const ir_node *n = kn->node;
    const ir_shape *x = &kn->in[0].shape;
    s->kind = kind_of(n->op);
    if (!kfam_f32_static(&kn->in[0]) || !kfam_f32_static(&kn->out[0])) return false;
    for (int i = 1; i < kn->n_in; i++)
        if (kern_has_input(kn, i) && !kfam_f32_static(&kn->in[i])) return false;
    if (s->kind == N_LP) {
        int64_t axis;
        if (ir_attr_int(n, "axis", -1, &axis) != ANVIL_OK ||
            ir_attr_int(n, "p", 2, &s->p) != ANVIL_OK || (s->p != 1 && s->p != 2))
            return false;
        if (axis < 0) axis += x->rank;
        if (axis < 0 || axis >= x->rank) return false;
        s->outer = s->inner = 1;
        for (int d = 0; d < x->rank; d++)
            if (d < axis)
                s->outer *= (size_t)x->d[d];
            else if (d > axis)
                s->inner *= (size_t)x->d[d];
        s->len = (size_t)x->d[axis];
        return true;
    }
    if (ir_attr_float(n, "epsilon", 1e-5f, &s->eps) != ANVIL_OK) return false;
    if (s->kind == N_RMS) {
        int64_t axis;
        if (!kern_has_input(kn, 1) || ir_attr_int(n, "axis", -1, &axis) != ANVIL_OK) return false;
        if (axis < 0) axis += x->rank;
        if (axis < 0 || axis >= x->rank) return false;
        s->rows = s->blk = 1;
        for (int d = 0; d < x->rank; d++) *(d < axis ? &s->rows : &s->blk) *= (size_t)x->d[d];
        return kfam_numel(&kn->in[1].shape) == s->blk;
    }
    if (x->rank < 2 || !kern_has_input(kn, 1) || !kern_has_input(kn, 2)) return false;
    s->channels = (size_t)x->d[1];
    s->spatial = 1;
    for (int d = 2; d < x->rank; d++) s->spatial *= (size_t)x->d[d];
    s->groups = s->channels;
    s->per_channel = true;
    if (s->kind == N_GROUP) {
        int64_t g;
        if (ir_attr_int(n, "num_groups", 1, &g) != ANVIL_OK || g <= 0) return false;
        s->groups = (size_t)g;
        if (s->channels % s->groups) return false;
        s->per_channel = n->opset >= 21;
    }
    size_t want = s->per_channel ? s->channels : s->groups;
    if (kfam_numel(&kn->in[1].shape) != want || kfam_numel(&kn->in[2].shape) != want) return false;
    s->rows = (size_t)x->d[0] * s->groups;
    s->blk = s->groups ? s->channels / s->groups * s->spatial : 0;
    return true;
}

typedef struct norm_job {
    const norm_state *s;
    const float *x, *scale, *bias;
    float *y;
    size_t nblk; /* Lp: column blocks per outer index */
} norm_job;

/* Instance / Group rows: statistics, then each channel's affine. */
static void group_chunk(void *arg, size_t begin, size_t end) {
    const norm_job *j = arg;
    const norm_state *s = j->s;
    const size_t cpg = s->channels / s->groups;
    for (size_t r = begin; r < end; r++) {
        const float *x = j->x + r * s->blk;
        float *y = j->y + r * s->blk;
        float sum;
        s->isa->rows(RED_OP_SUM, x, s->blk, 1, &sum);
        double mean = (double)sum / (double)s->blk;
        double var = (double)s->isa->sqdev(x, s->blk, (float)mean) / (double)s->blk;
        double inv = 1.0 / sqrt(var + (double)s->eps);
        size_t g = r % s->groups;
        for (size_t c = 0; c < cpg; c++) {
            size_t pi = s->per_channel ? g * cpg + c : g;
            s->isa->norm_apply(y + c * s->spatial, x + c * s->spatial, s->spatial, (float)mean,
                               (float)(inv * (double)j->scale[pi]), j->bias[pi]);
        }
    }
}

static void rms_chunk(void *arg, size_t begin, size_t end) {
    const norm_job *j = arg;
    const norm_state *s = j->s;
    for (size_t r = begin; r < end; r++) {
        const float *x = j->x + r * s->blk;
        float sq;
        s->isa->rows(RED_OP_SQSUM, x, s->blk, 1, &sq);
        double inv = 1.0 / sqrt((double)sq / (double)s->blk + (double)s->eps);
        s->isa->scale(j->y + r * s->blk, x, s->blk, (float)inv, j->scale);
    }
}

/* 1 / the Lp norm, or 0 for a zero norm (the reference leaves a zero line zero). */
static float lp_recip(const norm_state *s, float acc) {
    float norm = s->p == 1 ? acc : sqrtf(acc);
    return norm == 0.0f ? 0.0f : 1.0f / norm;
}

static void lp_rows_chunk(void *arg, size_t begin, size_t end) {
    const norm_job *j = arg;
    const norm_state *s = j->s;
    const red_op op = s->p == 1 ? RED_OP_ASUM : RED_OP_SQSUM;
    for (size_t r = begin; r < end; r++) {
        const float *x = j->x + r * s->len;
        float acc;
        s->isa->rows(op, x, s->len, 1, &acc);
        s->isa->scale(j->y + r * s->len, x, s->len, lp_recip(s, acc), NULL);
    }
}

/* A block of columns of one outer index: their norms down the axis, then each row times them. */
static void lp_cols_chunk(void *arg, size_t begin, size_t end) {
    const norm_job *j = arg;
    const norm_state *s = j->s;
    const red_op op = s->p == 1 ? RED_OP_ASUM : RED_OP_SQSUM;
    float rn[COL_BLOCK];
    for (size_t t = begin; t < end; t++) {
        size_t o = t / j->nblk, c0 = t % j->nblk * COL_BLOCK;
        size_t nc = s->inner - c0 < COL_BLOCK ? s->inner - c0 : COL_BLOCK;
        const float *x = j->x + o * s->len * s->inner + c0;
        float *y = j->y + o * s->len * s->inner + c0;
        s->isa->cols(op, x, s->len, s->inner, nc, rn);
        for (size_t c = 0; c < nc; c++) rn[c] = lp_recip(s, rn[c]);
        for (size_t l = 0; l < s->len; l++)
            s->isa->scale(y + l * s->inner, x + l * s->inner, nc, 1.0f, rn);
    }
}

static bool supports_common(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    norm_state s;
    return norm_form(kn, &s);
}

static anvil_status prepare_common(const kern_node *kn, const red_isa *isa, void **state) {
    norm_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    norm_form(kn, s);
    s->isa = isa;
    *state = s;
    return ANVIL_OK;
}

static void release_common(void *state) {
    free(state);
}

static anvil_status run_common(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    (void)ws;
    const norm_state *s = state;
    const size_t numel = op_tensor_numel(in[0]);
    if (numel == 0) return ANVIL_OK;
    norm_job j = {.s = s, .x = in[0]->data, .y = out[0]->data};
    j.scale = n_in > 1 && in[1] ? in[1]->data : NULL;
    j.bias = n_in > 2 && in[2] ? in[2]->data : NULL;
    op_ctx *c = numel >= RED_PAR_MIN ? ctx : NULL;
    switch (s->kind) {
    case N_INSTANCE:
    case N_GROUP:
        op_parallel_for(c, s->rows, group_chunk, &j);
        break;
    case N_RMS:
        op_parallel_for(c, s->rows, rms_chunk, &j);
        break;
    case N_LP:
        if (s->inner == 1) {
            op_parallel_for(c, s->outer, lp_rows_chunk, &j);
        } else {
            j.nblk = (s->inner + COL_BLOCK - 1) / COL_BLOCK;
            op_parallel_for(c, s->outer * j.nblk, lp_cols_chunk, &j);
        }
        break;
    }
    return ANVIL_OK;
}

#define NORM_VARIANT_ISA(ID, OP, ISA, NEEDS)                                                       \
    static anvil_status prep_##ID##_##ISA(const kern_node *kn, void **state) {                     \
        return prepare_common(kn, &reduce_isa_##ISA, state);                                       \
    }                                                                                              \
    const kern_variant reduce_v_##ID##_##ISA = {.name = #ID "_" #ISA,                              \
                                                .op = OP,                                          \
                                                .needs = NEEDS,                                    \
                                                .supports = supports_common,                       \
                                                .prepare = prep_##ID##_##ISA,                      \
                                                .release = release_common,                         \
                                                .run = run_common};

#define NORM_VARIANT(ID, OP)                                                                       \
    NORM_VARIANT_ISA(ID, OP, avx512, KERN_NEEDS_AVX512)                                            \
    NORM_VARIANT_ISA(ID, OP, avx2, KERN_NEEDS_AVX2)

NORM_VARIANT(instancenorm, IR_OP_INSTANCENORMALIZATION)
NORM_VARIANT(groupnorm, IR_OP_GROUPNORMALIZATION)
NORM_VARIANT(rmsnorm, IR_OP_RMSNORMALIZATION)
NORM_VARIANT(lpnorm, IR_OP_LPNORMALIZATION)
