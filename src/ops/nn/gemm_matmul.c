/* Gemm (Y = alpha * A' B' + beta * C) and MatMul (numpy matmul): attribute checking, shape
 * inference and the reference kernels.
 *
 * Both reduce to one row kernel: y[i, :] = sum_k A[i, k] * B[k, :], written in i-k-j order so the
 * innermost loop walks a row of B and a row of Y contiguously. B must therefore be K x N row-major:
 * Gemm's transB (the common PyTorch Linear export) is materialised once per run as a transposed
 * copy instead of being read with a stride of K in the inner loop. MatMul's batch dims broadcast
 * numpy-style: a broadcast dim gets stride 0. Work is split by output row (batch x M).
 *
 * Integer types accumulate in unsigned arithmetic of the same width, which gives the two's
 * complement wrap-around ONNX Runtime produces without the undefined behaviour of signed overflow.
 * Gemm on integers accepts only integral alpha/beta. */
#include "ops/nn_common.h"

typedef struct gemm_params {
    bool trans_a, trans_b;
    float alpha, beta;
    bool strict_c; /* opset < 7 with broadcast = 0: C must be exactly M x N */
} gemm_params;

/* ---- check ------------------------------------------------------------------------------- */

static anvil_status gemm_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, gemm_params, p);
    CORE_TRY(ir_attr_flag(n, "transA", false, &p->trans_a));
    CORE_TRY(ir_attr_flag(n, "transB", false, &p->trans_b));
    CORE_TRY(ir_attr_float(n, "alpha", 1.0f, &p->alpha));
    CORE_TRY(ir_attr_float(n, "beta", 1.0f, &p->beta));
    if (n->opset < 7) {
        bool bc;
        CORE_TRY(ir_attr_flag(n, "broadcast", false, &bc));
        p->strict_c = !bc;
    } else if (ir_node_attr(n, "broadcast")) {
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'broadcast' was removed in opset 7 (the model imports "
                        "opset %d); C always broadcasts now, drop the attribute",
                        ir_node_label(n), n->opset);
    }
    if (n->opset < 11 && !op_has_input(n, 2))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: input C is required before opset 11 (the model imports opset %d); "
                        "add a zero C or import opset >= 11",
                        ir_node_label(n), n->opset);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status matmul_check(ir_graph *g, ir_node *n) {
    (void)g;
    n->params = NULL;
    return ANVIL_OK;
}

/* ---- inference ------------------------------------------------------------------------------ */

static bool gemm_dtype_ok(anvil_dtype dt) {
    switch (dt) {
    case ANVIL_DTYPE_FLOAT32:
    case ANVIL_DTYPE_FLOAT64:
    case ANVIL_DTYPE_FLOAT16:
    case ANVIL_DTYPE_BFLOAT16:
    case ANVIL_DTYPE_INT32:
    case ANVIL_DTYPE_INT64:
    case ANVIL_DTYPE_UINT32:
    case ANVIL_DTYPE_UINT64:
        return true;
    default:
        return false;
    }
}

static anvil_status gemm_dtypes(const ir_node *n, const op_tinfo *in, int count) {
    if (!gemm_dtype_ok(in[0].dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: A has dtype %s; %s takes FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT32, "
                        "INT64, UINT32 or UINT64",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype), ir_op_name(n->op));
    for (int i = 1; i < count; i++)
        if (in[i].dtype != in[0].dtype)
            return core_err(ANVIL_ERR_SHAPE, "%s: input %d is %s but A is %s; they must match",
                            ir_node_label(n), i, anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(in[0].dtype));
    return ANVIL_OK;
}

/* Merges two views of the same dim (K of A and K of B): SHAPE error if both known and different. */
static anvil_status gemm_same_dim(const ir_node *n, const char *what, int64_t a, int64_t b) {
    if (a >= 0 && b >= 0 && a != b)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: inner dimensions differ: %s gives %lld vs %lld; they must be equal",
                        ir_node_label(n), what, (long long)a, (long long)b);
    return ANVIL_OK;
}

static anvil_status gemm_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const gemm_params *p = n->params;
    bool has_c = n_in > 2 && op_has_input(n, 2);
    CORE_TRY(gemm_dtypes(n, in, has_c ? 3 : 2));
    anvil_dtype dt = in[0].dtype;
    if (core_dtype_is_int(dt) && (p->alpha != floorf(p->alpha) || p->beta != floorf(p->beta)))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: alpha=%g and beta=%g must be whole numbers for integer dtype %s",
                        ir_node_label(n), (double)p->alpha, (double)p->beta, anvil_dtype_name(dt));
    ir_shape a = in[0].shape, b = in[1].shape;
    if ((a.rank >= 0 && a.rank != 2) || (b.rank >= 0 && b.rank != 2))
        return core_err(ANVIL_ERR_SHAPE, "%s: A has rank %d and B rank %d; Gemm needs both 2-D",
                        ir_node_label(n), a.rank, b.rank);
    if (a.rank < 0) nn_shape_unknown_dims(&a, 2);
    if (b.rank < 0) nn_shape_unknown_dims(&b, 2);
    int ai = p->trans_a ? 1 : 0, bj = p->trans_b ? 0 : 1;
    CORE_TRY(gemm_same_dim(n, p->trans_a || p->trans_b ? "A'/B' (after transA/transB)" : "A/B",
                           a.d[1 - ai], b.d[1 - bj]));
    out[0].dtype = dt;
    ir_shape *o = &out[0].shape;
    nn_shape_unknown_dims(o, 2);
    o->d[0] = a.d[ai];
    o->sym[0] = a.sym[ai];
    o->d[1] = b.d[bj];
    o->sym[1] = b.sym[bj];
    if (has_c) {
        const ir_shape *c = &in[2].shape;
        if (c->rank > 2)
            return core_err(ANVIL_ERR_SHAPE, "%s: C has rank %d; it must broadcast to M x N",
                            ir_node_label(n), c->rank);
        bool bad = c->rank >= 0 && p->strict_c && c->rank != 2;
        for (int d = 0; !bad && c->rank >= 0 && d < c->rank; d++) {
            int64_t cd = c->d[d], want = o->d[2 - c->rank + d];
            bad = cd >= 0 && want >= 0 && cd != want && (cd != 1 || p->strict_c);
        }
        if (bad) {
            char cs[128], os[128];
            return core_err(ANVIL_ERR_SHAPE, "%s: C has shape %s which does not %s the output %s",
                            ir_node_label(n), ir_shape_str(NULL, c, cs, sizeof cs),
                            p->strict_c ? "equal (broadcast=0)" : "broadcast to",
                            ir_shape_str(NULL, o, os, sizeof os));
        }
    }
    return ANVIL_OK;
}

static anvil_status matmul_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(gemm_dtypes(n, in, 2));
    out[0].dtype = in[0].dtype;
    const ir_shape *a = &in[0].shape, *b = &in[1].shape;
    if (a->rank == 0 || b->rank == 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: MatMul inputs must have rank >= 1 but A has rank %d and B rank %d",
                        ir_node_label(n), a->rank, b->rank);
    if (a->rank < 0 || b->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    int64_t ka = a->d[a->rank - 1], kb = b->d[b->rank >= 2 ? b->rank - 2 : 0];
    CORE_TRY(gemm_same_dim(n, "A's last dim vs B's second-to-last", ka, kb));
    return nn_matmul_shape(n, a, b, &out[0].shape);
}

/* ---- kernels ------------------------------------------------------------------------------- */

typedef struct mm_job {
    int64_t M, N, K;
    int64_t a_rs, a_ks; /* A[i, k] = a[i * a_rs + k * a_ks] within a batch */
    int nb;             /* batch rank of the output */
    int64_t bdims[IR_MAX_RANK], a_bstr[IR_MAX_RANK], b_bstr[IR_MAX_RANK];
    const void *a, *b; /* b: K x N row-major per batch */
    void *y;
    /* Gemm epilogue: y = alpha * acc + beta * c[i * c_rs + j * c_cs]; c NULL when absent or beta
     * is 0 (ONNX Runtime skips C then, so NaN in C does not leak through a zero beta) */
    bool epilogue;
    double alpha, beta;
    int64_t alpha_i, beta_i;
    const void *c;
    int64_t c_rs, c_cs;
} mm_job;

#define MM_DEFINE(T, SUF, IS_INT)                                                                  \
    static void mm_range_##SUF(void *arg, size_t begin, size_t end) {                              \
        const mm_job *j = arg;                                                                     \
        const T alpha = IS_INT ? (T)j->alpha_i : (T)j->alpha;                                      \
        const T beta = IS_INT ? (T)j->beta_i : (T)j->beta;                                         \
        for (size_t r = begin; r < end; r++) {                                                     \
            int64_t bt = (int64_t)r / j->M, i = (int64_t)r % j->M, aoff = 0, boff = 0;             \
            for (int d = j->nb - 1; d >= 0; d--) {                                                 \
                int64_t q = bt % j->bdims[d];                                                      \
                bt /= j->bdims[d];                                                                 \
                aoff += q * j->a_bstr[d];                                                          \
                boff += q * j->b_bstr[d];                                                          \
            }                                                                                      \
            const T *a = (const T *)j->a + aoff + i * j->a_rs;                                     \
            const T *b = (const T *)j->b + boff;                                                   \
            T *restrict y = (T *)j->y + (int64_t)r * j->N;                                         \
            for (int64_t jn = 0; jn < j->N; jn++) y[jn] = 0;                                       \
            for (int64_t k = 0; k < j->K; k++) {                                                   \
                const T av = a[k * j->a_ks];                                                       \
                const T *restrict brow = b + k * j->N;                                             \
                for (int64_t jn = 0; jn < j->N; jn++) y[jn] += av * brow[jn];                      \
            }                                                                                      \
            if (!j->epilogue) continue;                                                            \
            const T *c = j->c ? (const T *)j->c + i * j->c_rs : NULL;                              \
            for (int64_t jn = 0; jn < j->N; jn++)                                                  \
                y[jn] = alpha * y[jn] + (c ? beta * c[jn * j->c_cs] : (T)0);                       \
        }                                                                                          \
    }

MM_DEFINE(float, f32, 0)
MM_DEFINE(double, f64, 0)
MM_DEFINE(uint32_t, u32, 1)
MM_DEFINE(uint64_t, u64, 1)

/* dst (cols x rows) = transpose of src (rows x cols), elements of es bytes. */
static void mm_transpose_bytes(const void *src, void *dst, int64_t rows, int64_t cols, size_t es) {
    const char *s = src;
    char *d = dst;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            memcpy(d + (size_t)(c * rows + r) * es, s + (size_t)(r * cols + c) * es, es);
}

/* Runs the job on tensors a, b(, c) of dtype dt into y: picks the compute type, widens
 * FLOAT16/BFLOAT16 to float and back, and packs B when the caller asks for its transpose. */
static anvil_status mm_execute(const ir_node *n, mm_job *j, const op_tensor *a, const op_tensor *b,
                               bool trans_b, const op_tensor *c, op_tensor *y, op_ctx *ctx) {
    size_t rows = op_tensor_numel(y) / (size_t)(j->N ? j->N : 1);
    if (op_tensor_numel(y) == 0) return ANVIL_OK;
    anvil_dtype dt = a->dtype;
    bool staged = dt == ANVIL_DTYPE_FLOAT16 || dt == ANVIL_DTYPE_BFLOAT16;
    float *oa = NULL, *ob = NULL, *oc = NULL, *oy = NULL;
    void *packed = NULL;
    anvil_status s = ANVIL_ERR_OUT_OF_MEMORY;
    size_t es = staged ? sizeof(float) : anvil_dtype_size(dt);
    j->a = staged ? (const void *)nn_stage_in_f32(n, a, &oa) : a->data;
    j->b = (j->a && staged) ? (const void *)nn_stage_in_f32(n, b, &ob) : b->data;
    j->c = (c && j->b && staged) ? (const void *)nn_stage_in_f32(n, c, &oc) : c ? c->data : NULL;
    j->y = (j->b && (!c || j->c)) ? (staged ? nn_stage_out_f32(n, y, &oy) : y->data) : NULL;
    if (!j->y) goto done;
    if (trans_b && j->K > 0 && j->N > 0) {
        packed = malloc((size_t)(j->K * j->N) * es);
        if (!packed) {
            core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory to pack B (%lld x %lld)",
                     ir_node_label(n), (long long)j->K, (long long)j->N);
            goto done;
        }
        mm_transpose_bytes(j->b, packed, j->N, j->K, es);
        j->b = packed;
    }
    if (j->epilogue && j->beta == 0) j->c = NULL;
    op_range_fn fn;
    switch (dt) {
    case ANVIL_DTYPE_FLOAT64:
        fn = mm_range_f64;
        break;
    case ANVIL_DTYPE_INT32:
    case ANVIL_DTYPE_UINT32:
        fn = mm_range_u32;
        break;
    case ANVIL_DTYPE_INT64:
    case ANVIL_DTYPE_UINT64:
        fn = mm_range_u64;
        break;
    default:
        fn = mm_range_f32;
        break;
    }
    op_parallel_for(ctx, rows, fn, j);
    if (oy) {
        nn_stage_out_f32_finish(y, oy);
        oy = NULL;
    }
    s = ANVIL_OK;
done:
    free(oa);
    free(ob);
    free(oc);
    free(oy);
    free(packed);
    return s;
}

static anvil_status gemm_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    const gemm_params *p = n->params;
    const op_tensor *a = in[0], *b = in[1], *c = n_in > 2 ? in[2] : NULL;
    mm_job j;
    memset(&j, 0, sizeof j);
    j.M = p->trans_a ? a->dims[1] : a->dims[0];
    j.K = p->trans_a ? a->dims[0] : a->dims[1];
    j.N = p->trans_b ? b->dims[0] : b->dims[1];
    j.a_rs = p->trans_a ? 1 : j.K;
    j.a_ks = p->trans_a ? j.M : 1;
    j.epilogue = true;
    j.alpha = p->alpha;
    j.beta = p->beta;
    j.alpha_i = (int64_t)p->alpha;
    j.beta_i = (int64_t)p->beta;
    if (c) {
        /* unidirectional broadcast: a C dim of 1 (or a missing leading dim) repeats */
        int64_t c0 = c->rank == 2 ? c->dims[0] : 1, c1 = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        j.c_rs = c0 == 1 ? 0 : c1;
        j.c_cs = c1 == 1 ? 0 : 1;
    }
    return mm_execute(n, &j, a, b, p->trans_b, c, out[0], ctx);
}

static anvil_status matmul_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const op_tensor *a = in[0], *b = in[1];
    op_tensor *y = out[0];
    mm_job j;
    memset(&j, 0, sizeof j);
    int ra = a->rank, rb = b->rank;
    j.M = ra >= 2 ? a->dims[ra - 2] : 1;
    j.K = a->dims[ra - 1];
    j.N = rb >= 2 ? b->dims[rb - 1] : 1;
    j.a_rs = j.K;
    j.a_ks = 1;
    /* batch dims of the output, right-aligned against each input's batch dims */
    j.nb = y->rank - (ra >= 2) - (rb >= 2);
    int nba = ra >= 2 ? ra - 2 : 0, nbb = rb >= 2 ? rb - 2 : 0;
    int64_t astr = j.M * j.K, bstr = j.K * j.N;
    for (int d = j.nb - 1; d >= 0; d--) {
        int da = d - (j.nb - nba), db = d - (j.nb - nbb);
        j.bdims[d] = y->dims[d];
        j.a_bstr[d] = (da >= 0 && a->dims[da] != 1) ? astr : 0;
        j.b_bstr[d] = (db >= 0 && b->dims[db] != 1) ? bstr : 0;
        if (da >= 0) astr *= a->dims[da];
        if (db >= 0) bstr *= b->dims[db];
    }
    return mm_execute(n, &j, a, b, false, NULL, y, ctx);
}

const op_impl op_impl_gemm = {.min_inputs = 2,
                              .max_inputs = 3,
                              .min_outputs = 1,
                              .max_outputs = 1,
                              .check = gemm_check,
                              .infer = gemm_infer,
                              .run = gemm_run};

const op_impl op_impl_matmul = {.min_inputs = 2,
                                .max_inputs = 2,
                                .min_outputs = 1,
                                .max_outputs = 1,
                                .check = matmul_check,
                                .infer = matmul_infer,
                                .run = matmul_run};

/* ---- anvil.GemmPair (nn_common.h) ------------------------------------------------------------
 * The reference runs the two MatMuls one after the other through a whole intermediate, which is
 * exactly what the fused kernel avoids, so that it checks the fusion and not only the tiling. */

anvil_status pair_first_parse(const ir_node *n, ir_fusion *first) {
    const char *act;
    CORE_TRY(ir_attr_string(n, "act", "none", &act));
    memset(first, 0, sizeof *first);
    first->residual = -1;
    first->bias = op_has_input(n, 2) ? 2 : -1;
    if (!ir_act_from_name(act, &first->act))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'act' is \"%s\", which is no activation anvil fuses",
                        ir_node_label(n), act);
    CORE_TRY(ir_attr_float(n, "alpha", 0.0f, &first->alpha));
    CORE_TRY(ir_attr_float(n, "beta", 0.0f, &first->beta));
    CORE_TRY(ir_attr_float(n, "lo", -INFINITY, &first->lo));
    CORE_TRY(ir_attr_float(n, "hi", INFINITY, &first->hi));
    return ANVIL_OK;
}

void pair_first_act(const ir_fusion *first, float *t, size_t n) {
    if (first->act == IR_ACT_NONE) return;
    for (size_t i = 0; i < n; i++) t[i] = ir_act_eval(first, t[i]);
}

static anvil_status gemm_pair_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, pair_params, p);
    CORE_TRY(pair_first_parse(n, &p->first));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status gemm_pair_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                    int n_in, op_tinfo *out, int n_out) {
    if (in[0].dtype != ANVIL_DTYPE_FLOAT32 || in[1].shape.rank != 2 || in[3].shape.rank != 2)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s takes float32 X and rank-2 W1 and W2; got %s X, W1 of rank %d and "
                        "W2 of rank %d",
                        ir_node_label(n), ir_op_name(n->op), anvil_dtype_name(in[0].dtype),
                        in[1].shape.rank, in[3].shape.rank);
    op_tinfo first[2] = {in[0], in[1]}, second[2];
    CORE_TRY(matmul_infer(g, n, first, 2, &second[0], 1));
    second[0].value = NULL;
    second[1] = in[3];
    CORE_TRY(matmul_infer(g, n, second, 2, out, n_out));
    for (int b = 2; b <= 4 && b < n_in; b += 2) {
        const ir_shape *bs = &in[b].shape, *w = &in[b - 1].shape;
        if (!op_has_input(n, b)) continue;
        if (bs->rank != 1 || (bs->d[0] >= 0 && w->d[1] >= 0 && bs->d[0] != w->d[1]))
            return core_err(ANVIL_ERR_SHAPE, "%s: bias B%d must be [%lld] (W%d's columns)",
                            ir_node_label(n), b / 2, (long long)w->d[1], b / 2);
    }
    (void)n_in;
    return ANVIL_OK;
}

/* y[r, j] += bias[j] over rows of cols floats */
static void pair_add_cols(float *y, size_t rows, int64_t cols, const float *bias) {
    for (size_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) y[r * (size_t)cols + (size_t)j] += bias[j];
}

static anvil_status gemm_pair_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                  op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    const pair_params *p = n->params;
    op_tensor t = *in[0];
    t.dims[t.rank - 1] = in[1]->dims[1];
    const size_t nt = op_tensor_numel(&t), cols0 = (size_t)in[1]->dims[1];
    t.data = malloc((nt ? nt : 1) * sizeof(float));
    if (!t.data) return ANVIL_ERR_OUT_OF_MEMORY;
    const op_tensor *first[2] = {in[0], in[1]};
    op_tensor *tp = &t;
    anvil_status st = matmul_run(n, first, 2, &tp, 1, ctx);
    if (st == ANVIL_OK) {
        if (n_in > 2 && in[2])
            pair_add_cols(t.data, cols0 ? nt / cols0 : 0, (int64_t)cols0, in[2]->data);
        pair_first_act(&p->first, t.data, nt);
        const op_tensor *second[2] = {&t, in[3]};
        st = matmul_run(n, second, 2, out, 1, ctx);
    }
    const int64_t cols1 = in[3]->dims[1];
    if (st == ANVIL_OK && n_in > 4 && in[4] && cols1)
        pair_add_cols(out[0]->data, op_tensor_numel(out[0]) / (size_t)cols1, cols1, in[4]->data);
    free(t.data);
    return st;
}

const op_impl op_impl_gemm_pair = {.min_inputs = 4,
                                   .max_inputs = 5,
                                   .min_outputs = 1,
                                   .max_outputs = 1,
                                   .check = gemm_pair_check,
                                   .infer = gemm_pair_infer,
                                   .run = gemm_pair_run};
