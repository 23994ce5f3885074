/* LinearAttention (opset 27): recurrent linear attention over packed [B, T,
 * H*D] inputs.
 *
 * Each KV head keeps a d_k x d_v state S that every token updates, in token
 * order, by one of four rules: "linear" adds k (x) v; "gated" first decays S by
 * exp(g); "delta" adds beta * k (x) (v - S^T k), so S moves towards reproducing
 * v from k; "gated_delta" decays and then applies the delta rule. A query head
 * reads o = scale * q^T S from the state of the KV head it shares (GQA: query
 * head h uses KV head h / (q_num_heads / kv_num_heads)). The state is
 * accumulated in float whatever the storage type, which is what keeps
 * FLOAT16/BFLOAT16 results within tolerance; the final state is returned in
 * past_state's dtype (or the query's when there is no past state). chunk_size
 * only tunes chunked implementations and does not change results, so it is
 * validated and otherwise ignored by this sequential reference kernel. */
#include "ops/nn_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { LA_Q, LA_K, LA_V, LA_PAST, LA_DECAY, LA_BETA };

typedef struct la_params {
    int64_t q_heads, kv_heads;
    float scale; /* 0: 1 / sqrt(d_k) */
    bool gating, delta;
} la_params;

static anvil_status la_check(ir_graph *g, ir_node *n) {
    CORE_TRY(nn_check_arrived(n, "LinearAttention", 27));
    OP_PARAMS_NEW(g, la_params, p);
    if (!ir_node_attr(n, "q_num_heads") || !ir_node_attr(n, "kv_num_heads"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attributes 'q_num_heads' and 'kv_num_heads' are required",
                        ir_node_label(n));
    CORE_TRY(ir_attr_int(n, "q_num_heads", 0, &p->q_heads));
    CORE_TRY(ir_attr_int(n, "kv_num_heads", 0, &p->kv_heads));
    if (p->q_heads <= 0 || p->kv_heads <= 0 || p->q_heads % p->kv_heads != 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: q_num_heads (%lld) must be a positive multiple of kv_num_heads "
                        "(%lld)",
                        ir_node_label(n), (long long)p->q_heads, (long long)p->kv_heads);
    int64_t chunk;
    CORE_TRY(ir_attr_int(n, "chunk_size", 64, &chunk));
    if (chunk <= 0)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: chunk_size is %lld; it must be positive",
                        ir_node_label(n), (long long)chunk);
    CORE_TRY(ir_attr_float(n, "scale", 0.0f, &p->scale));
    if (!isfinite(p->scale))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: scale is not finite", ir_node_label(n));
    const char *rule;
    CORE_TRY(ir_attr_string(n, "update_rule", "gated_delta", &rule));
    if (strcmp(rule, "linear") == 0)
        p->gating = false, p->delta = false;
    else if (strcmp(rule, "gated") == 0)
        p->gating = true, p->delta = false;
    else if (strcmp(rule, "delta") == 0)
        p->gating = false, p->delta = true;
    else if (strcmp(rule, "gated_delta") == 0)
        p->gating = true, p->delta = true;
    else
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: update_rule '%s' is not one of linear, gated, delta, gated_delta",
                        ir_node_label(n), rule);
    if (p->gating != op_has_input(n, LA_DECAY))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: update_rule '%s' %s the decay input (4)",
                        ir_node_label(n), rule, p->gating ? "requires" : "forbids");
    if (p->delta != op_has_input(n, LA_BETA))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: update_rule '%s' %s the beta input (5)",
                        ir_node_label(n), rule, p->delta ? "requires" : "forbids");
    n->params = p;
    return ANVIL_OK;
}

static bool la_float_type(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT16 || dt == ANVIL_DTYPE_BFLOAT16;
}

static const char *const la_names[] = {"query", "key", "value", "past_state", "decay", "beta"};

/* A dim that must equal `want`; either may be unknown (< 0) at load time. */
static anvil_status la_dim(const ir_node *n, int input, int axis, int64_t got, int64_t want,
                           const char *what) {
    if (got < 0 || want < 0 || got == want) return ANVIL_OK;
    return core_err(ANVIL_ERR_SHAPE, "%s: %s (input %d) dim %d is %lld but must be %lld (%s)",
                    ir_node_label(n), la_names[input], input, axis, (long long)got, (long long)want,
                    what);
}

static anvil_status la_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                             op_tinfo *out, int n_out) {
    (void)g;
    const la_params *p = n->params;
    anvil_dtype t = in[LA_Q].dtype;
    for (int i = 0; i < n_in && i <= LA_BETA; i++) {
        if (!op_has_input(n, i)) continue;
        if (!la_float_type(in[i].dtype))
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: %s (input %d) has dtype %s; LinearAttention takes FLOAT, "
                            "FLOAT16 or BFLOAT16",
                            ir_node_label(n), la_names[i], i, anvil_dtype_name(in[i].dtype));
        if (i != LA_PAST && in[i].dtype != t)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: %s (input %d) is %s but query is %s; they must match",
                            ir_node_label(n), la_names[i], i, anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(t));
        int want = i == LA_PAST ? 4 : 3;
        if (in[i].shape.rank >= 0 && in[i].shape.rank != want)
            return core_err(ANVIL_ERR_SHAPE, "%s: %s (input %d) has rank %d; expected %d",
                            ir_node_label(n), la_names[i], i, in[i].shape.rank, want);
    }
    const ir_shape *qs = &in[LA_Q].shape, *vs = &in[LA_V].shape;
    int64_t b = qs->rank == 3 ? qs->d[0] : -1, tl = qs->rank == 3 ? qs->d[1] : -1;
    int64_t dk = -1, dv = -1;
    if (qs->rank == 3 && qs->d[2] >= 0) {
        if (qs->d[2] % p->q_heads != 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: query's last dim %lld is not divisible by q_num_heads %lld",
                            ir_node_label(n), (long long)qs->d[2], (long long)p->q_heads);
        dk = qs->d[2] / p->q_heads;
    }
    if (vs->rank == 3 && vs->d[2] >= 0) {
        if (vs->d[2] % p->kv_heads != 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: value's last dim %lld is not divisible by kv_num_heads %lld",
                            ir_node_label(n), (long long)vs->d[2], (long long)p->kv_heads);
        dv = vs->d[2] / p->kv_heads;
    }
    for (int i = LA_K; i <= LA_BETA; i++) {
        if (!op_has_input(n, i) || in[i].shape.rank < 0) continue;
        const ir_shape *s = &in[i].shape;
        if (i == LA_PAST) {
            CORE_TRY(la_dim(n, i, 0, s->d[0], b, "query's batch"));
            CORE_TRY(la_dim(n, i, 1, s->d[1], p->kv_heads, "kv_num_heads"));
            CORE_TRY(la_dim(n, i, 2, s->d[2], dk, "the query head size"));
            CORE_TRY(la_dim(n, i, 3, s->d[3], dv, "the value head size"));
            continue;
        }
        CORE_TRY(la_dim(n, i, 0, s->d[0], b, "query's batch"));
        CORE_TRY(la_dim(n, i, 1, s->d[1], tl, "query's sequence length"));
        int64_t last = s->d[2];
        if (i == LA_K)
            CORE_TRY(la_dim(n, i, 2, last, dk < 0 ? -1 : dk * p->kv_heads,
                            "kv_num_heads * the query head size"));
        if (i == LA_DECAY && last >= 0 && last != p->kv_heads && dk >= 0 &&
            last != p->kv_heads * dk)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: decay's last dim is %lld; expected kv_num_heads (%lld) or "
                            "kv_num_heads * d_k (%lld)",
                            ir_node_label(n), (long long)last, (long long)p->kv_heads,
                            (long long)(p->kv_heads * dk));
        if (i == LA_BETA && last >= 0 && last != p->kv_heads && last != 1)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: beta's last dim is %lld; expected kv_num_heads (%lld) or 1",
                            ir_node_label(n), (long long)last, (long long)p->kv_heads);
    }
    out[0].dtype = t;
    out[0].shape.rank = 3;
    out[0].shape.d[0] = b;
    out[0].shape.d[1] = tl;
    out[0].shape.d[2] = dv < 0 ? IR_DIM_UNKNOWN : dv * p->q_heads;
    for (int d = 0; d < 3; d++) {
        if (out[0].shape.d[d] < 0) out[0].shape.d[d] = IR_DIM_UNKNOWN;
        out[0].shape.sym[d] = d < 2 && qs->rank == 3 ? qs->sym[d] : -1;
    }
    if (n_out > 1) {
        out[1].dtype = op_has_input(n, LA_PAST) ? in[LA_PAST].dtype : t;
        int64_t dims[4] = {b, p->kv_heads, dk, dv};
        out[1].shape.rank = 4;
        for (int d = 0; d < 4; d++) {
            out[1].shape.d[d] = dims[d] < 0 ? IR_DIM_UNKNOWN : dims[d];
            out[1].shape.sym[d] = d == 0 && qs->rank == 3 ? qs->sym[0] : -1;
        }
    }
    return ANVIL_OK;
}

typedef struct la_job {
    const la_params *p;
    const op_tensor *q, *k, *v, *past, *decay, *beta;
    op_tensor *out;
    float *state; /* [B, H_kv, d_k, d_v] */
    float *upd;   /* [B, H_kv, d_v] scratch: the vector written into the state */
    size_t b, t, dk, dv, group;
    float scale;
} la_job;

/* One (batch, KV head) pair: its whole recurrence over the sequence. */
static void la_head(const la_job *j, size_t bh) {
    const la_params *p = j->p;
    size_t kvh = (size_t)p->kv_heads, qh = (size_t)p->q_heads;
    size_t bi = bh / kvh, h = bh % kvh, dk = j->dk, dv = j->dv;
    float *s = j->state + bh * dk * dv, *u = j->upd + bh * dv;
    if (j->past)
        for (size_t e = 0; e < dk * dv; e++)
            s[e] = (float)core_load_f64(j->past->dtype, j->past->data, bh * dk * dv + e);
    else
        memset(s, 0, dk * dv * sizeof *s);
    for (size_t ti = 0; ti < j->t; ti++) {
        size_t row = bi * j->t + ti;
        size_t kbase = row * kvh * dk + h * dk, vbase = row * kvh * dv + h * dv;
        if (p->gating) {
            size_t dlast = (size_t)j->decay->dims[2];
            for (size_t d = 0; d < dk; d++) {
                size_t gi = dlast == kvh ? row * kvh + h : row * dlast + h * dk + d;
                float f = expf((float)core_load_f64(j->decay->dtype, j->decay->data, gi));
                for (size_t m = 0; m < dv; m++) s[d * dv + m] *= f;
            }
        }
        for (size_t m = 0; m < dv; m++)
            u[m] = (float)core_load_f64(j->v->dtype, j->v->data, vbase + m);
        if (p->delta) {
            size_t blast = (size_t)j->beta->dims[2];
            size_t bidx = row * blast + (blast == 1 ? 0 : h);
            float beta = (float)core_load_f64(j->beta->dtype, j->beta->data, bidx);
            for (size_t m = 0; m < dv; m++) {
                float r = 0.0f;
                for (size_t d = 0; d < dk; d++)
                    r += s[d * dv + m] * (float)core_load_f64(j->k->dtype, j->k->data, kbase + d);
                u[m] = beta * (u[m] - r);
            }
        }
        for (size_t d = 0; d < dk; d++) {
            float kd = (float)core_load_f64(j->k->dtype, j->k->data, kbase + d);
            for (size_t m = 0; m < dv; m++) s[d * dv + m] += kd * u[m];
        }
        for (size_t gq = 0; gq < j->group; gq++) {
            size_t hq = h * j->group + gq;
            size_t qbase = row * qh * dk + hq * dk, obase = row * qh * dv + hq * dv;
            for (size_t m = 0; m < dv; m++) {
                float acc = 0.0f;
                for (size_t d = 0; d < dk; d++)
                    acc += (float)core_load_f64(j->q->dtype, j->q->data, qbase + d) * s[d * dv + m];
                core_store_f64(j->out->dtype, j->out->data, obase + m, (double)(j->scale * acc));
            }
        }
    }
}

static void la_range(void *arg, size_t begin, size_t end) {
    for (size_t i = begin; i < end; i++) la_head(arg, i);
}

static anvil_status la_run(const ir_node *n, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, op_ctx *ctx) {
    const la_params *p = n->params;
    la_job j = {.p = p,
                .q = in[LA_Q],
                .k = in[LA_K],
                .v = in[LA_V],
                .past = n_in > LA_PAST ? in[LA_PAST] : NULL,
                .decay = n_in > LA_DECAY ? in[LA_DECAY] : NULL,
                .beta = n_in > LA_BETA ? in[LA_BETA] : NULL,
                .out = out[0]};
    j.b = (size_t)j.q->dims[0];
    j.t = (size_t)j.q->dims[1];
    j.dk = (size_t)(j.q->dims[2] / p->q_heads);
    j.dv = (size_t)(j.v->dims[2] / p->kv_heads);
    j.group = (size_t)(p->q_heads / p->kv_heads);
    j.scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)j.dk);
    size_t heads = j.b * (size_t)p->kv_heads, cells, ucells;
    if (!core_mul_size(heads, j.dk, &cells) || !core_mul_size(cells, j.dv, &cells) ||
        !core_mul_size(heads, j.dv, &ucells))
        return core_err(ANVIL_ERR_LIMIT, "%s: the recurrent state is too large", ir_node_label(n));
    j.state = malloc((cells ? cells : 1) * sizeof *j.state);
    j.upd = malloc((ucells ? ucells : 1) * sizeof *j.upd);
    if (!j.state || !j.upd) {
        free(j.state);
        free(j.upd);
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for the %zu-element state",
                        ir_node_label(n), cells);
    }
    op_parallel_for(ctx, heads, la_range, &j);
    if (n_out > 1 && out[1])
        for (size_t e = 0; e < cells; e++)
            core_store_f64(out[1]->dtype, out[1]->data, e, j.state[e]);
    free(j.state);
    free(j.upd);
    return ANVIL_OK;
}

const op_impl op_impl_linearattention = {.min_inputs = 3,
                                         .max_inputs = 6,
                                         .min_outputs = 1,
                                         .max_outputs = 2,
                                         .check = la_check,
                                         .infer = la_infer,
                                         .run = la_run};
