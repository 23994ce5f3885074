/* Attention-family ops: RotaryEmbedding (opset 23) and Attention (opsets 23, 24): attribute
 * checking, shape inference and reference kernels.
 *
 * RotaryEmbedding rotates pairs of elements of every head vector by a position-dependent angle
 * whose cosine and sine come from caches. The pairs are (e, e + d/2) for the split layout and (2e,
 * 2e + 1) for the interleaved one, over the first rotary_embedding_dim elements; the rest pass
 * through. The cache row is picked by position_ids[b, s] when given, otherwise the caches are
 * indexed by (b, s) directly. The kernel computes in float and reads and writes through the element
 * loaders, so FLOAT, FLOAT16 and BFLOAT16 (the schema's types) share one path. */
#include "ops/nn_common.h"

/* ---- RotaryEmbedding ------------------------------------------------------------------------- */

typedef struct rope_params {
    int64_t num_heads;  /* 0: absent */
    int64_t rotary_dim; /* 0: the whole head */
    bool interleaved;
} rope_params;

static anvil_status rope_check(ir_graph *g, ir_node *n) {
    CORE_TRY(nn_check_arrived(n, "RotaryEmbedding", 23));
    OP_PARAMS_NEW(g, rope_params, p);
    CORE_TRY(ir_attr_int(n, "num_heads", 0, &p->num_heads));
    CORE_TRY(ir_attr_int(n, "rotary_embedding_dim", 0, &p->rotary_dim));
    CORE_TRY(ir_attr_flag(n, "interleaved", false, &p->interleaved));
    if (p->num_heads < 0 || p->num_heads > NN_MAX_ATTR)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'num_heads' is %lld; it must be >= 1", ir_node_label(n),
                        (long long)p->num_heads);
    if (p->rotary_dim < 0 || p->rotary_dim % 2 != 0 || p->rotary_dim > NN_MAX_ATTR)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'rotary_embedding_dim' is %lld; it must be an even number "
                        ">= 0 (0: rotate the whole head)",
                        ir_node_label(n), (long long)p->rotary_dim);
    n->params = p;
    return ANVIL_OK;
}

/* Head geometry of X: batch, sequence, heads, head size; -1 where unknown. */
typedef struct rope_geom {
    int64_t batch, seq, heads, head_size, rot;
} rope_geom;

static anvil_status rope_geometry(const ir_node *n, const ir_shape *x, rope_geom *g) {
    const rope_params *p = n->params;
    g->batch = g->seq = g->heads = g->head_size = g->rot = -1;
    if (x->rank < 0) return ANVIL_OK;
    char xs[128];
    if (x->rank == 4) {
        if (p->num_heads && x->d[1] >= 0 && x->d[1] != p->num_heads)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: X has shape %s (batch, heads, sequence, head size) but num_heads "
                            "is %lld; they must agree",
                            ir_node_label(n), ir_shape_str(NULL, x, xs, sizeof xs),
                            (long long)p->num_heads);
        g->batch = x->d[0];
        g->heads = x->d[1];
        g->seq = x->d[2];
        g->head_size = x->d[3];
    } else if (x->rank == 3) {
        if (!p->num_heads)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: X is 3-D (batch, sequence, hidden) so attribute 'num_heads' is "
                            "required; add it",
                            ir_node_label(n));
        g->batch = x->d[0];
        g->seq = x->d[1];
        g->heads = p->num_heads;
        if (x->d[2] >= 0) {
            if (x->d[2] % p->num_heads != 0)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: X has hidden size %lld, not a multiple of num_heads %lld",
                                ir_node_label(n), (long long)x->d[2], (long long)p->num_heads);
            g->head_size = x->d[2] / p->num_heads;
        }
    } else {
        return core_err(ANVIL_ERR_SHAPE, "%s: X has shape %s; expected rank 3 or 4",
                        ir_node_label(n), ir_shape_str(NULL, x, xs, sizeof xs));
    }
    g->rot = p->rotary_dim ? p->rotary_dim : g->head_size;
    if (g->head_size >= 0 && (g->rot > g->head_size || g->rot % 2 != 0))
        return core_err(
            ANVIL_ERR_SHAPE,
            "%s: the rotated part (%lld elements) must be even and fit the head size %lld",
            ir_node_label(n), (long long)g->rot, (long long)g->head_size);
    return ANVIL_OK;
}

static anvil_status rope_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    anvil_dtype dt = in[0].dtype;
    if (dt != ANVIL_DTYPE_FLOAT32 && dt != ANVIL_DTYPE_FLOAT16 && dt != ANVIL_DTYPE_BFLOAT16)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: X has dtype %s; RotaryEmbedding takes FLOAT, FLOAT16 or BFLOAT16",
                        ir_node_label(n), anvil_dtype_name(dt));
    for (int i = 1; i <= 2; i++)
        if (in[i].dtype != dt)
            return core_err(ANVIL_ERR_SHAPE, "%s: %s is %s but X is %s; they must match",
                            ir_node_label(n), i == 1 ? "cos_cache" : "sin_cache",
                            anvil_dtype_name(in[i].dtype), anvil_dtype_name(dt));
    rope_geom gm;
    CORE_TRY(rope_geometry(n, &in[0].shape, &gm));
    bool has_pos = n_in > 3 && op_has_input(n, 3);
    int want_rank = has_pos ? 2 : 3;
    for (int i = 1; i <= 2; i++) {
        const ir_shape *c = &in[i].shape;
        if (c->rank < 0) continue;
        char cs[128];
        bool bad = c->rank != want_rank;
        if (!bad && gm.rot >= 0 && c->d[c->rank - 1] >= 0 && c->d[c->rank - 1] != gm.rot / 2)
            bad = true;
        if (!bad && !has_pos)
            bad = (c->d[0] >= 0 && gm.batch >= 0 && c->d[0] != gm.batch) ||
                  (c->d[1] >= 0 && gm.seq >= 0 && c->d[1] != gm.seq);
        if (bad)
            return core_err(
                ANVIL_ERR_SHAPE,
                "%s: %s has shape %s; expected %s with last dim %lld (half the rotated part)",
                ir_node_label(n), i == 1 ? "cos_cache" : "sin_cache",
                ir_shape_str(NULL, c, cs, sizeof cs),
                has_pos ? "(max_position + 1, dim) with position_ids"
                        : "(batch, sequence, dim) without position_ids",
                (long long)(gm.rot / 2));
    }
    if (in[1].shape.rank >= 0 && in[2].shape.rank >= 0 &&
        !ir_shape_equal(&in[1].shape, &in[2].shape)) {
        char cs[128], ss[128];
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: cos_cache has shape %s but sin_cache %s; they must be equal",
                        ir_node_label(n), ir_shape_str(NULL, &in[1].shape, cs, sizeof cs),
                        ir_shape_str(NULL, &in[2].shape, ss, sizeof ss));
    }
    if (has_pos) {
        const op_tinfo *pi = &in[3];
        if (pi->dtype != ANVIL_DTYPE_INT64)
            return core_err(ANVIL_ERR_SHAPE, "%s: position_ids is %s; expected INT64",
                            ir_node_label(n), anvil_dtype_name(pi->dtype));
        const ir_shape *ps = &pi->shape;
        if (ps->rank >= 0 &&
            (ps->rank != 2 || (ps->d[0] >= 0 && gm.batch >= 0 && ps->d[0] != gm.batch) ||
             (ps->d[1] >= 0 && gm.seq >= 0 && ps->d[1] != gm.seq))) {
            char s[128];
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: position_ids has shape %s; expected (batch %lld, sequence %lld)",
                            ir_node_label(n), ir_shape_str(NULL, ps, s, sizeof s),
                            (long long)gm.batch, (long long)gm.seq);
        }
    }
    out[0].dtype = dt;
    out[0].shape = in[0].shape;
    return ANVIL_OK;
}

static anvil_status rope_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const rope_params *p = n->params;
    const op_tensor *x = in[0], *cs = in[1], *sn = in[2];
    const op_tensor *pos = n_in > 3 ? in[3] : NULL;
    op_tensor *y = out[0];
    ir_shape xs;
    ir_shape_set(&xs, x->rank, x->dims);
    rope_geom g;
    CORE_TRY(rope_geometry(n, &xs, &g));
    int64_t half = g.rot / 2, max_pos = pos ? cs->dims[0] : 0;
    for (int64_t b = 0; b < g.batch; b++)
        for (int64_t s = 0; s < g.seq; s++) {
            int64_t row = b * g.seq + s;
            if (pos) {
                row = ((const int64_t *)pos->data)[b * g.seq + s];
                if (row < 0 || row >= max_pos)
                    return core_err(ANVIL_ERR_RUNTIME,
                                    "%s: position_ids[%lld, %lld] is %lld; it must be in 0..%lld "
                                    "(the caches' first dim)",
                                    ir_node_label(n), (long long)b, (long long)s, (long long)row,
                                    (long long)(max_pos - 1));
            }
            for (int64_t h = 0; h < g.heads; h++) {
                size_t base =
                    x->rank == 4
                        ? (size_t)(((b * g.heads + h) * g.seq + s) * g.head_size)
                        : (size_t)((b * g.seq + s) * g.heads * g.head_size + h * g.head_size);
                for (int64_t e = 0; e < half; e++) {
                    size_t i1 = base + (size_t)(p->interleaved ? 2 * e : e);
                    size_t i2 = base + (size_t)(p->interleaved ? 2 * e + 1 : e + half);
                    float c = (float)core_load_f64(cs->dtype, cs->data, (size_t)(row * half + e));
                    float si = (float)core_load_f64(sn->dtype, sn->data, (size_t)(row * half + e));
                    float x1 = (float)core_load_f64(x->dtype, x->data, i1);
                    float x2 = (float)core_load_f64(x->dtype, x->data, i2);
                    core_store_f64(y->dtype, y->data, i1, (double)(c * x1 - si * x2));
                    core_store_f64(y->dtype, y->data, i2, (double)(si * x1 + c * x2));
                }
                for (int64_t e = g.rot; e < g.head_size; e++)
                    core_store_f64(y->dtype, y->data, base + (size_t)e,
                                   core_load_f64(x->dtype, x->data, base + (size_t)e));
            }
        }
    return ANVIL_OK;
}

const op_impl op_impl_rotaryembedding = {.min_inputs = 3,
                                         .max_inputs = 4,
                                         .min_outputs = 1,
                                         .max_outputs = 1,
                                         .check = rope_check,
                                         .infer = rope_infer,
                                         .run = rope_run};

/* ---- Attention --------------------------------------------------------------------------------
 *
 * Scaled dot-product attention over Q (B x Hq x Sq x D, or B x Sq x Hq*D), K (B x Hk x Skv x D) and
 * V (B x Hk x Skv x Dv), with an optional KV cache (past_key / past_value, concatenated in front of
 * K and V to form present_key / present_value), grouped-query heads (query head h reads key/value
 * head h / (Hq / Hk)), an additive or boolean mask broadcast to B x Hq x Sq x T (its last dim may
 * be shorter than T and is then padded with -inf / false), a causal mask aligned to the upper left
 * of the new tokens (key j is hidden from query i when j > i + past length), nonpad_kv_seqlen
 * (opset 24), softcap, and the four qk_matmul_output modes. Everything is computed in double from
 * operands read through the element loaders; a row whose every key is masked gives NaN, as the ONNX
 * reference does. */

typedef struct attn_params {
    bool has_scale;
    float scale;
    bool causal;
    int64_t q_heads, kv_heads; /* 0: absent */
    float softcap;
    int64_t qk_mode;
} attn_params;

enum { ATT_Q, ATT_K, ATT_V, ATT_MASK, ATT_PAST_K, ATT_PAST_V, ATT_NONPAD };

static anvil_status attn_check(ir_graph *g, ir_node *n) {
    CORE_TRY(nn_check_arrived(n, "Attention", 23));
    if (n->opset < 24 && op_has_input(n, ATT_NONPAD))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: input nonpad_kv_seqlen arrived in opset 24 (the model imports opset "
                        "%d); drop it or import opset >= 24",
                        ir_node_label(n), n->opset);
    OP_PARAMS_NEW(g, attn_params, p);
    p->has_scale = ir_node_attr(n, "scale") != NULL;
    CORE_TRY(ir_attr_float(n, "scale", 1.0f, &p->scale));
    CORE_TRY(ir_attr_flag(n, "is_causal", false, &p->causal));
    CORE_TRY(ir_attr_int(n, "q_num_heads", 0, &p->q_heads));
    CORE_TRY(ir_attr_int(n, "kv_num_heads", 0, &p->kv_heads));
    CORE_TRY(ir_attr_float(n, "softcap", 0.0f, &p->softcap));
    CORE_TRY(ir_attr_int(n, "qk_matmul_output_mode", 0, &p->qk_mode));
    int64_t sp;
    CORE_TRY(ir_attr_int(n, "softmax_precision", ANVIL_DTYPE_FLOAT32, &sp));
    if (sp != ANVIL_DTYPE_FLOAT32 && sp != ANVIL_DTYPE_FLOAT16 && sp != ANVIL_DTYPE_BFLOAT16 &&
        sp != ANVIL_DTYPE_FLOAT64)
        return core_err(
            ANVIL_ERR_UNSUPPORTED,
            "%s: attribute 'softmax_precision' is %lld; expected a floating type (1, 10, 11 or 16)",
            ir_node_label(n), (long long)sp);
    if (p->q_heads < 0 || p->kv_heads < 0 || p->q_heads > NN_MAX_ATTR || p->kv_heads > NN_MAX_ATTR)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: q_num_heads (%lld) and kv_num_heads (%lld) must be >= 1",
                        ir_node_label(n), (long long)p->q_heads, (long long)p->kv_heads);
    if (p->qk_mode < 0 || p->qk_mode > 3)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'qk_matmul_output_mode' is %lld; expected 0, 1, 2 or 3",
                        ir_node_label(n), (long long)p->qk_mode);
    if (p->softcap < 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'softcap' is %g; it must be >= 0 (0: no softcap)",
                        ir_node_label(n), (double)p->softcap);
    if (op_has_input(n, ATT_PAST_K) != op_has_input(n, ATT_PAST_V))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: past_key and past_value must be given together (or neither)",
                        ir_node_label(n));
    n->params = p;
    return ANVIL_OK;
}

/* Q, K, V as 4-D: batch, heads, sequence, head size (-1 where unknown). */
typedef struct attn_dims {
    int64_t b, hq, hk, sq, skv, d, dv, past, total;
} attn_dims;

static anvil_status attn_heads_3d(const ir_node *n, const char *what, int64_t hidden, int64_t heads,
                                  int64_t *head_size) {
    if (hidden < 0) {
        *head_size = -1;
        return ANVIL_OK;
    }
    if (hidden % heads != 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: %s has hidden size %lld, not a multiple of %lld heads",
                        ir_node_label(n), what, (long long)hidden, (long long)heads);
    *head_size = hidden / heads;
    return ANVIL_OK;
}

/* Checks that the past cache `what` (shape s) is batch x kv heads x past x head size. */
static anvil_status attn_past_shape(const ir_node *n, const char *what, const ir_shape *s,
                                    const attn_dims *a, int64_t past, int64_t head) {
    if (s->rank < 0) return ANVIL_OK;
    int64_t want[4] = {a->b, a->hk, past, head};
    bool bad = s->rank != 4;
    for (int i = 0; !bad && i < 4; i++) bad = want[i] >= 0 && s->d[i] >= 0 && s->d[i] != want[i];
    if (!bad) return ANVIL_OK;
    char b[128];
    return core_err(ANVIL_ERR_SHAPE,
                    "%s: %s has shape %s; expected (batch %lld, kv heads %lld, past length %lld, "
                    "head size %lld)",
                    ir_node_label(n), what, ir_shape_str(NULL, s, b, sizeof b), (long long)a->b,
                    (long long)a->hk, (long long)past, (long long)head);
}

/* pk / pv: the past caches' shapes, NULL when absent (both or neither). */
static anvil_status attn_dims_of(const ir_node *n, const ir_shape *q, const ir_shape *k,
                                 const ir_shape *v, const ir_shape *pk, const ir_shape *pv,
                                 attn_dims *a) {
    const attn_params *p = n->params;
    memset(a, 0xff, sizeof *a); /* every field -1 */
    if (q->rank < 0 || k->rank < 0 || v->rank < 0) return ANVIL_OK;
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: Q, K and V have ranks %d, %d and %d; they must all be 3 or all be 4",
                        ir_node_label(n), q->rank, k->rank, v->rank);
    a->b = q->d[0];
    const ir_shape *kv[2] = {k, v};
    for (int i = 0; i < 2; i++)
        if (kv[i]->d[0] >= 0 && a->b >= 0 && kv[i]->d[0] != a->b)
            return core_err(ANVIL_ERR_SHAPE, "%s: %s has batch %lld but Q %lld; they must match",
                            ir_node_label(n), i ? "V" : "K", (long long)kv[i]->d[0],
                            (long long)a->b);
    if (q->rank == 4) {
        a->hq = q->d[1];
        a->sq = q->d[2];
        a->d = q->d[3];
        a->hk = k->d[1];
        a->skv = k->d[2];
        a->dv = v->d[3];
        if (k->d[3] >= 0 && a->d >= 0 && k->d[3] != a->d)
            return core_err(ANVIL_ERR_SHAPE, "%s: K has head size %lld but Q %lld",
                            ir_node_label(n), (long long)k->d[3], (long long)a->d);
        if (v->d[1] >= 0 && a->hk >= 0 && v->d[1] != a->hk)
            return core_err(ANVIL_ERR_SHAPE, "%s: V has %lld heads but K %lld", ir_node_label(n),
                            (long long)v->d[1], (long long)a->hk);
    } else {
        if (!p->q_heads || !p->kv_heads)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: 3-D Q, K and V need attributes q_num_heads and kv_num_heads",
                            ir_node_label(n));
        a->hq = p->q_heads;
        a->hk = p->kv_heads;
        a->sq = q->d[1];
        a->skv = k->d[1];
        CORE_TRY(attn_heads_3d(n, "Q", q->d[2], a->hq, &a->d));
        int64_t dk = -1;
        CORE_TRY(attn_heads_3d(n, "K", k->d[2], a->hk, &dk));
        CORE_TRY(attn_heads_3d(n, "V", v->d[2], a->hk, &a->dv));
        if (dk >= 0 && a->d >= 0 && dk != a->d)
            return core_err(ANVIL_ERR_SHAPE, "%s: K has head size %lld but Q %lld",
                            ir_node_label(n), (long long)dk, (long long)a->d);
    }
    if (v->d[v->rank == 4 ? 2 : 1] >= 0 && a->skv >= 0 && v->d[v->rank == 4 ? 2 : 1] != a->skv)
        return core_err(ANVIL_ERR_SHAPE, "%s: K and V have different sequence lengths",
                        ir_node_label(n));
    if (a->hq >= 0 && a->hk > 0 && a->hq % a->hk != 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: Q has %lld heads and K/V %lld; the query heads must be a multiple of "
                        "the key/value heads",
                        ir_node_label(n), (long long)a->hq, (long long)a->hk);
    a->past = 0;
    if (pk) {
        if (pk->rank >= 0 && pk->rank != 4)
            return core_err(ANVIL_ERR_SHAPE, "%s: past_key has rank %d; expected 4",
                            ir_node_label(n), pk->rank);
        a->past = pk->rank == 4 ? pk->d[2] : -1;
        CORE_TRY(attn_past_shape(n, "past_key", pk, a, a->past, a->d));
        if (pv) CORE_TRY(attn_past_shape(n, "past_value", pv, a, a->past, a->dv));
    }
    a->total = -1;
    if (a->past >= 0 && a->skv >= 0 && !core_add_i64(a->past, a->skv, &a->total))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the past sequence (%lld) and the new one (%lld) together overflow "
                        "a dimension; check past_key's and K's shapes",
                        ir_node_label(n), (long long)a->past, (long long)a->skv);
    return ANVIL_OK;
}

static void attn_set(ir_shape *s, int rank, const int64_t *d) {
    nn_shape_unknown_dims(s, rank);
    for (int i = 0; i < rank; i++) s->d[i] = d[i] < 0 ? IR_DIM_UNKNOWN : d[i];
}

static anvil_status attn_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    anvil_dtype dt = in[ATT_Q].dtype;
    if (dt != ANVIL_DTYPE_FLOAT32 && dt != ANVIL_DTYPE_FLOAT16 && dt != ANVIL_DTYPE_BFLOAT16 &&
        dt != ANVIL_DTYPE_FLOAT64)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: Q has dtype %s; Attention takes FLOAT, FLOAT16, BFLOAT16 or DOUBLE",
                        ir_node_label(n), anvil_dtype_name(dt));
    static const char *const names[] = {"Q", "K", "V", "attn_mask", "past_key", "past_value"};
    for (int i = 1; i < 6 && i < n_in; i++) {
        if (!op_has_input(n, i)) continue;
        if (i == ATT_MASK && in[i].dtype == ANVIL_DTYPE_BOOL) continue;
        if (in[i].dtype != dt)
            return core_err(ANVIL_ERR_SHAPE, "%s: %s is %s but Q is %s; they must match%s",
                            ir_node_label(n), names[i], anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(dt), i == ATT_MASK ? " (or be BOOL)" : "");
    }
    bool has_past = n_in > ATT_PAST_K && op_has_input(n, ATT_PAST_K);
    attn_dims a;
    CORE_TRY(attn_dims_of(n, &in[ATT_Q].shape, &in[ATT_K].shape, &in[ATT_V].shape,
                          has_past ? &in[ATT_PAST_K].shape : NULL,
                          has_past && n_in > ATT_PAST_V ? &in[ATT_PAST_V].shape : NULL, &a));
    if (n_in > ATT_MASK && op_has_input(n, ATT_MASK)) {
        const ir_shape *m = &in[ATT_MASK].shape;
        if (m->rank >= 0) {
            int64_t want[4] = {a.b, a.hq, a.sq, a.total};
            bool bad = m->rank < 1 || m->rank > 4;
            for (int i = 0; !bad && i < m->rank; i++) {
                int64_t md = m->d[i], w = want[4 - m->rank + i];
                if (md < 0 || w < 0) continue;
                bad = i == m->rank - 1 ? md > w : (md != 1 && md != w);
            }
            if (bad) {
                char ms[128];
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: attn_mask has shape %s; it must broadcast to (batch %lld, "
                                "heads %lld, q length %lld, total length %lld)",
                                ir_node_label(n), ir_shape_str(NULL, m, ms, sizeof ms),
                                (long long)a.b, (long long)a.hq, (long long)a.sq,
                                (long long)a.total);
            }
        }
    }
    if (n_in > ATT_NONPAD && op_has_input(n, ATT_NONPAD)) {
        if (in[ATT_NONPAD].dtype != ANVIL_DTYPE_INT64)
            return core_err(ANVIL_ERR_SHAPE, "%s: nonpad_kv_seqlen is %s; expected INT64",
                            ir_node_label(n), anvil_dtype_name(in[ATT_NONPAD].dtype));
        if (has_past)
            return core_err(
                ANVIL_ERR_INVALID_MODEL,
                "%s: nonpad_kv_seqlen cannot be used together with past_key / past_value",
                ir_node_label(n));
    }
    int q_rank = in[ATT_Q].shape.rank;
    for (int o = 0; o < n_out; o++) out[o].dtype = dt;
    if (q_rank < 0) {
        for (int o = 0; o < n_out; o++) ir_shape_unknown(&out[o].shape);
        return ANVIL_OK;
    }
    if (q_rank == 4) {
        attn_set(&out[0].shape, 4, (int64_t[]){a.b, a.hq, a.sq, a.dv});
    } else {
        int64_t h = a.dv >= 0 ? a.hq * a.dv : -1;
        attn_set(&out[0].shape, 3, (int64_t[]){a.b, a.sq, h});
    }
    if (n_out > 1) attn_set(&out[1].shape, 4, (int64_t[]){a.b, a.hk, a.total, a.d});
    if (n_out > 2) attn_set(&out[2].shape, 4, (int64_t[]){a.b, a.hk, a.total, a.dv});
    if (n_out > 3) attn_set(&out[3].shape, 4, (int64_t[]){a.b, a.hq, a.sq, a.total});
    return ANVIL_OK;
}

/* Element (b, h, s, e) of a Q/K/V tensor in its 4-D or 3-D layout. */
static size_t attn_at(const op_tensor *t, int64_t heads, int64_t b, int64_t h, int64_t s,
                      int64_t e) {
    if (t->rank == 4) return (size_t)(((b * t->dims[1] + h) * t->dims[2] + s) * t->dims[3] + e);
    int64_t hs = t->dims[2] / heads;
    return (size_t)((b * t->dims[1] + s) * t->dims[2] + h * hs + e);
}

/* Fills head (b, h) of a present K or V cache (B x Hk x T x width, in double): the past rows
 * first, then the current tensor's. */
static void attn_cache_fill(double *cache, const op_tensor *past, const op_tensor *cur,
                            const attn_dims *a, int64_t width, int64_t b, int64_t h) {
    int64_t T = a->total;
    for (int64_t t = 0; t < T; t++)
        for (int64_t e = 0; e < width; e++)
            cache[((b * a->hk + h) * T + t) * width + e] =
                t < a->past ? core_load_f64(past->dtype, past->data,
                                            (size_t)(((b * a->hk + h) * a->past + t) * width + e))
                            : core_load_f64(cur->dtype, cur->data,
                                            attn_at(cur, a->hk, b, h, t - a->past, e));
}

static anvil_status attn_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)ctx;
    const attn_params *p = n->params;
    const op_tensor *q = in[ATT_Q], *k = in[ATT_K], *v = in[ATT_V];
    const op_tensor *mask = n_in > ATT_MASK ? in[ATT_MASK] : NULL;
    const op_tensor *pk = n_in > ATT_PAST_K ? in[ATT_PAST_K] : NULL;
    const op_tensor *pv = n_in > ATT_PAST_V ? in[ATT_PAST_V] : NULL;
    const op_tensor *nonpad = n_in > ATT_NONPAD ? in[ATT_NONPAD] : NULL;
    ir_shape qs, ks, vs, ps, pvs;
    ir_shape_set(&qs, q->rank, q->dims);
    ir_shape_set(&ks, k->rank, k->dims);
    ir_shape_set(&vs, v->rank, v->dims);
    if (pk) ir_shape_set(&ps, pk->rank, pk->dims);
    if (pv) ir_shape_set(&pvs, pv->rank, pv->dims);
    attn_dims a;
    CORE_TRY(attn_dims_of(n, &qs, &ks, &vs, pk ? &ps : NULL, pk && pv ? &pvs : NULL, &a));
    int64_t T = a.total, grp = a.hk > 0 ? a.hq / a.hk : 1;
    /* present K / V: B x Hk x T x D(v), the past rows first */
    size_t nk = (size_t)(a.b * a.hk * T * a.d), nv = (size_t)(a.b * a.hk * T * a.dv);
    double *kc = malloc((nk + 1) * sizeof *kc), *vc = malloc((nv + 1) * sizeof *vc);
    double *row = malloc(((size_t)T + 1) * sizeof *row);
    if (!kc || !vc || !row) {
        free(kc);
        free(vc);
        free(row);
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for the key/value cache",
                        ir_node_label(n));
    }
    for (int64_t b = 0; b < a.b; b++)
        for (int64_t h = 0; h < a.hk; h++) {
            attn_cache_fill(kc, pk, k, &a, a.d, b, h);
            attn_cache_fill(vc, pv, v, &a, a.dv, b, h);
        }
    /* mask strides over (B, Hq, Sq, T'), 0 for broadcast dims */
    int64_t mstr[4] = {0, 0, 0, 0}, mlast = 0;
    if (mask) {
        int64_t s = 1;
        for (int i = mask->rank - 1; i >= 0; i--) {
            int d4 = 4 - mask->rank + i;
            mstr[d4] = mask->dims[i] == 1 && d4 != 3 ? 0 : s;
            s *= mask->dims[i];
        }
        mlast = mask->dims[mask->rank - 1];
    }
    double scale = p->has_scale ? (double)p->scale : 1.0 / sqrt((double)a.d);
    op_tensor *y = out[0], *qk = n_out > 3 ? out[3] : NULL;
    for (int64_t b = 0; b < a.b; b++) {
        int64_t valid = nonpad ? ((const int64_t *)nonpad->data)[b] : T;
        for (int64_t h = 0; h < a.hq; h++) {
            int64_t hk = h / grp;
            for (int64_t i = 0; i < a.sq; i++) {
                double mx = -INFINITY;
                for (int64_t t = 0; t < T; t++) {
                    double s = 0;
                    const double *kr = kc + ((b * a.hk + hk) * T + t) * a.d;
                    for (int64_t e = 0; e < a.d; e++)
                        s += core_load_f64(q->dtype, q->data, attn_at(q, a.hq, b, h, i, e)) * kr[e];
                    s *= scale;
                    if (p->softcap > 0) s = p->softcap * tanh(s / p->softcap);
                    size_t qi = (size_t)(((b * a.hq + h) * a.sq + i) * T + t);
                    if (qk && p->qk_mode <= 1) core_store_f64(qk->dtype, qk->data, qi, s);
                    double bias = 0;
                    if (mask) {
                        if (t >= mlast) {
                            bias = -INFINITY;
                        } else {
                            size_t mi =
                                (size_t)(b * mstr[0] + h * mstr[1] + i * mstr[2] + t * mstr[3]);
                            if (mask->dtype == ANVIL_DTYPE_BOOL)
                                bias = ((const uint8_t *)mask->data)[mi] ? 0 : -INFINITY;
                            else
                                bias = core_load_f64(mask->dtype, mask->data, mi);
                        }
                    }
                    if (p->causal && t > i + a.past) bias += -INFINITY;
                    if (t >= valid) bias += -INFINITY;
                    s += bias;
                    if (qk && p->qk_mode == 2) core_store_f64(qk->dtype, qk->data, qi, s);
                    row[t] = s;
                    if (s > mx) mx = s;
                }
                double sum = 0;
                for (int64_t t = 0; t < T; t++) {
                    row[t] = exp(row[t] - mx);
                    sum += row[t];
                }
                for (int64_t t = 0; t < T; t++) {
                    row[t] /= sum;
                    if (qk && p->qk_mode == 3)
                        core_store_f64(qk->dtype, qk->data,
                                       (size_t)(((b * a.hq + h) * a.sq + i) * T + t), row[t]);
                }
                for (int64_t e = 0; e < a.dv; e++) {
                    double acc = 0;
                    for (int64_t t = 0; t < T; t++)
                        acc += row[t] * vc[((b * a.hk + hk) * T + t) * a.dv + e];
                    size_t yi = y->rank == 4
                                    ? (size_t)(((b * a.hq + h) * a.sq + i) * a.dv + e)
                                    : (size_t)((b * a.sq + i) * a.hq * a.dv + h * a.dv + e);
                    core_store_f64(y->dtype, y->data, yi, acc);
                }
            }
        }
    }
    for (int o = 1; o <= 2 && o < n_out; o++) {
        if (!out[o]) continue;
        const double *src = o == 1 ? kc : vc;
        size_t num = o == 1 ? nk : nv;
        for (size_t e = 0; e < num; e++) core_store_f64(out[o]->dtype, out[o]->data, e, src[e]);
    }
    free(kc);
    free(vc);
    free(row);
    return ANVIL_OK;
}

const op_impl op_impl_attention = {.min_inputs = 3,
                                   .max_inputs = 7,
                                   .min_outputs = 1,
                                   .max_outputs = 4,
                                   .check = attn_check,
                                   .infer = attn_infer,
                                   .run = attn_run};
