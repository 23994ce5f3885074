/* anvil.Sdpa (ops/sdpa_common.h): attribute checking, shape inference, the geometry every kernel
 * computes its strides from, and the reference kernel, which does what the unfused MatMul, scale,
 * mask, Softmax and MatMul nodes did, one query row at a time, with the S x S matrix never
 * materialized (a row of scores at a time). It is the oracle of kernels/cpu/attn. */
#include "ops/nn_common.h"
#include "ops/sdpa_common.h"

#include <float.h>

static const char *const sdpa_perm_names[4] = {"perm_q", "perm_k", "perm_v", "perm_o"};

static anvil_status sdpa_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, sdpa_params, p);
    CORE_TRY(ir_attr_float(n, "scale", 1.0f, &p->scale));
    CORE_TRY(ir_attr_float(n, "fill", -FLT_MAX, &p->fill));
    CORE_TRY(ir_attr_flag(n, "invert", false, &p->invert));
    int64_t causal;
    CORE_TRY(ir_attr_int(n, "causal", 0, &causal));
    if (causal < 0 || causal > 2)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'causal' is %lld; it must be 0 (none), 1 (upper-left) or "
                        "2 (lower-right aligned)",
                        ir_node_label(n), (long long)causal);
    p->causal = (int)causal;
    CORE_TRY(ir_attr_float(n, "softcap", 0.0f, &p->softcap));
    if (!(p->softcap >= 0.0f))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'softcap' is %g; it must be >= 0 (0: no softcap)",
                        ir_node_label(n), (double)p->softcap);
    for (int x = 0; x < 4; x++) {
        const int64_t *v;
        size_t count;
        CORE_TRY(ir_attr_ints(n, sdpa_perm_names[x], &v, &count));
        unsigned seen = 0;
        for (size_t a = 0; v && a < count; a++)
            if (v[a] >= 0 && v[a] < 4) seen |= 1u << v[a];
        if (!v || count != 4 || seen != 0xf)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute '%s' must be a permutation of 0..3 (the physical dim of "
                            "each of batch, heads, sequence, head size)",
                            ir_node_label(n), sdpa_perm_names[x]);
        for (int a = 0; a < 4; a++) p->perm[x][a] = (int8_t)v[a];
    }
    static const char *const view_names[3] = {"view_q", "view_k", "view_v"};
    for (int x = 0; x < 3; x++) {
        const int64_t *v;
        size_t count;
        CORE_TRY(ir_attr_ints(n, view_names[x], &v, &count));
        if (!v) continue;
        if (count != 3 || v[0] < 0 || v[1] < 1 || v[2] < 1 || v[0] > NN_MAX_EXTENT ||
            v[1] > NN_MAX_EXTENT || v[2] > NN_MAX_EXTENT)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute '%s' must be [offset >= 0, heads >= 1, head size >= 1]",
                            ir_node_label(n), view_names[x]);
        p->viewed[x] = true;
        for (int i = 0; i < 3; i++) p->view[x][i] = v[i];
    }
    n->params = p;
    return ANVIL_OK;
}

/* Operand x as a 4-D shape: itself, or its view [batch, sequence, heads, head size] of a rank-3
 * [batch, sequence, width] tensor; SHAPE error when the view does not fit. */
static anvil_status sdpa_view_shape(const ir_node *n, int x, const ir_shape *s, ir_shape *v) {
    const sdpa_params *p = n->params;
    *v = *s;
    if (x > SDPA_V || !p->viewed[x] || s->rank < 0) return ANVIL_OK;
    const int64_t *w = p->view[x];
    if (s->rank != 3 || (s->d[2] >= 0 && s->d[2] < w[0] + w[1] * w[2]))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input %d is viewed as columns [%lld, %lld) of a rank-3 [batch, "
                        "sequence, width] tensor; it has rank %d and width %lld",
                        ir_node_label(n), x, (long long)w[0], (long long)(w[0] + w[1] * w[2]),
                        s->rank, (long long)(s->rank == 3 ? s->d[2] : -1));
    v->rank = 4;
    v->d[2] = w[1];
    v->d[3] = w[2];
    v->sym[2] = v->sym[3] = -1;
    return ANVIL_OK;
}

/* The logical dims of a rank-4 operand: dim a of the result is dim perm[a] of s. */
static void sdpa_logical(const ir_shape *s, const int8_t *perm, ir_shape *l) {
    *l = *s;
    for (int a = 0; a < 4; a++) {
        l->d[a] = s->d[perm[a]];
        l->sym[a] = s->sym[perm[a]];
    }
}

/* s with its last dim made 1 (a mask's key dim, which does not broadcast into the output). */
static void sdpa_drop_last(const ir_shape *s, ir_shape *l) {
    *l = *s;
    if (l->rank > 0) {
        l->d[l->rank - 1] = 1;
        l->sym[l->rank - 1] = -1;
    }
}

static bool sdpa_known_differ(const ir_shape *a, int da, const ir_shape *b, int db) {
    return a->d[da] >= 0 && b->d[db] >= 0 && a->d[da] != b->d[db];
}

static anvil_status sdpa_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const sdpa_params *p = n->params;
    for (int i = 0; i < n_in; i++) {
        if (!op_has_input(n, i)) continue;
        const anvil_dtype want = i == SDPA_KEEP ? ANVIL_DTYPE_BOOL : ANVIL_DTYPE_FLOAT32;
        if (in[i].dtype != want)
            return core_err(ANVIL_ERR_UNSUPPORTED, "%s: input %d is %s; it must be %s",
                            ir_node_label(n), i, anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(want));
        const bool viewed = i < 3 && p->viewed[i];
        if (in[i].shape.rank >= 0 && !viewed &&
            (i < 3 ? in[i].shape.rank != 4 : in[i].shape.rank > 4))
            return core_err(ANVIL_ERR_SHAPE, "%s: input %d has rank %d; it must be %s",
                            ir_node_label(n), i, in[i].shape.rank, i < 3 ? "4" : "at most 4");
    }
    out[0].dtype = ANVIL_DTYPE_FLOAT32;
    out[0].value = NULL;
    if (in[0].shape.rank < 0 || in[1].shape.rank < 0 || in[2].shape.rank < 0) {
        nn_shape_unknown_dims(&out[0].shape, 4);
        return ANVIL_OK;
    }
    ir_shape q, k, v, t, b, w[3];
    for (int x = 0; x < 3; x++) CORE_TRY(sdpa_view_shape(n, x, &in[x].shape, &w[x]));
    sdpa_logical(&w[0], p->perm[SDPA_Q], &q);
    sdpa_logical(&w[1], p->perm[SDPA_K], &k);
    sdpa_logical(&w[2], p->perm[SDPA_V], &v);
    if (sdpa_known_differ(&q, 3, &k, 3) || sdpa_known_differ(&k, 2, &v, 2))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: q's head size %lld must equal k's (%lld), and k's key sequence %lld "
                        "v's (%lld)",
                        ir_node_label(n), (long long)q.d[3], (long long)k.d[3], (long long)k.d[2],
                        (long long)v.d[2]);
    /* batch, heads and query sequence broadcast over every operand */
    b = q;
    b.d[3] = 1;
    b.sym[3] = -1;
    /* k and v: their heads may be a divisor of q's (grouped-query attention); such heads
     * take no part in the broadcast */
    const ir_shape *kvs[2] = {&k, &v};
    for (int x = 0; x < 2; x++) {
        t = *kvs[x];
        t.d[2] = t.d[3] = 1;
        t.sym[2] = t.sym[3] = -1;
        if (t.d[1] > 1 && q.d[1] > t.d[1] && q.d[1] % t.d[1] == 0) {
            t.d[1] = 1;
            t.sym[1] = -1;
        }
        CORE_TRY(op_broadcast_shape(n, &b, &t, &b));
    }
    for (int i = SDPA_MASK; i <= SDPA_KEEP && i < n_in; i++) {
        if (!op_has_input(n, i) || in[i].shape.rank < 0) continue;
        const ir_shape *m = &in[i].shape;
        if (m->rank >= 1 && m->d[m->rank - 1] != 1 && sdpa_known_differ(m, m->rank - 1, &k, 2))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: mask input %d has %lld keys; k has %lld (a mask's last dim is "
                            "the key sequence, or 1)",
                            ir_node_label(n), i, (long long)m->d[m->rank - 1], (long long)k.d[2]);
        sdpa_drop_last(m, &t);
        CORE_TRY(op_broadcast_shape(n, &b, &t, &b));
    }
    b.d[3] = v.d[3];
    b.sym[3] = v.sym[3];
    ir_shape *o = &out[0].shape;
    *o = b;
    for (int a = 0; a < 4; a++) {
        o->d[p->perm[SDPA_O][a]] = b.d[a];
        o->sym[p->perm[SDPA_O][a]] = b.sym[a];
    }
    return ANVIL_OK;
}

/* Row-major element strides of a static shape. */
static void sdpa_strides(const ir_shape *s, int64_t *st) {
    int64_t acc = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= s->d[d];
    }
}

/* Joins size `dim` of an operand into the problem's size *size (1 broadcasts); false when
 * neither is 1 and they differ. */
static bool sdpa_join(int64_t *size, int64_t dim) {
    if (dim == *size || dim == 1) return true;
    if (*size != 1) return false;
    *size = dim;
    return true;
}

anvil_status sdpa_geometry(const ir_node *n, const ir_shape *const *in, int n_in, sdpa_geom *g) {
    const sdpa_params *p = n->params;
    memset(g, 0, sizeof *g);
    int64_t ld[3][4], ls[3][4];
    for (int x = 0; x < 3; x++) {
        int64_t st[IR_MAX_RANK];
        ir_shape vs;
        CORE_TRY(sdpa_view_shape(n, x, in[x], &vs));
        if (p->viewed[x]) {
            /* [batch, sequence, heads, size] over rows of `width` elements */
            const int64_t width = in[x]->d[2];
            st[0] = in[x]->d[1] * width;
            st[1] = width;
            st[2] = p->view[x][2];
            st[3] = 1;
            g->off[x] = p->view[x][0];
        } else {
            sdpa_strides(in[x], st);
        }
        for (int a = 0; a < 4; a++) {
            ld[x][a] = vs.d[p->perm[x][a]];
            ls[x][a] = st[p->perm[x][a]];
        }
    }
    g->batch = g->heads = g->sq = g->group = 1;
    bool ok = ld[SDPA_Q][3] == ld[SDPA_K][3] && ld[SDPA_K][2] == ld[SDPA_V][2];
    /* grouped-query attention: k and v with fewer heads than q, a divisor of them, each shared
     * by a group of consecutive q heads */
    const int64_t qh = ld[SDPA_Q][1], kh = ld[SDPA_K][1];
    if (kh > 1 && ld[SDPA_V][1] == kh && qh > kh && qh % kh == 0) g->group = qh / kh;
    for (int x = 0; x < 3; x++)
        ok = ok && sdpa_join(&g->batch, ld[x][0]) &&
             (x > 0 && g->group > 1 ? true : sdpa_join(&g->heads, ld[x][1]));
    ok = ok && sdpa_join(&g->sq, ld[SDPA_Q][2]);
    g->sk = ld[SDPA_K][2];
    g->d = ld[SDPA_Q][3];
    g->dv = ld[SDPA_V][3];
    int64_t md[2][4];
    for (int i = SDPA_MASK; i <= SDPA_KEEP; i++) {
        const ir_shape *m = i < n_in ? in[i] : NULL;
        if (!m) continue;
        int64_t st[IR_MAX_RANK];
        sdpa_strides(m, st);
        int64_t *ms = i == SDPA_MASK ? g->mask : g->keep;
        for (int a = 0; a < 4; a++) {
            const int dm = m->rank - 4 + a;
            md[i - SDPA_MASK][a] = dm >= 0 ? m->d[dm] : 1;
            ms[a] = dm >= 0 && m->d[dm] != 1 ? st[dm] : 0;
        }
        ok = ok && m->rank <= 4 && sdpa_join(&g->batch, md[i - SDPA_MASK][0]) &&
             sdpa_join(&g->heads, md[i - SDPA_MASK][1]) &&
             sdpa_join(&g->sq, md[i - SDPA_MASK][2]) &&
             (md[i - SDPA_MASK][3] == 1 || md[i - SDPA_MASK][3] == g->sk);
        if (i == SDPA_MASK)
            g->has_mask = true;
        else
            g->has_keep = true;
    }
    if (!ok) {
        char s[3][128];
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: q %s, k %s and v %s (and the masks) do not fit together as "
                        "attention operands (batch and heads broadcast, head sizes and key "
                        "sequences agree)",
                        ir_node_label(n), ir_shape_str(NULL, in[0], s[0], sizeof s[0]),
                        ir_shape_str(NULL, in[1], s[1], sizeof s[1]),
                        ir_shape_str(NULL, in[2], s[2], sizeof s[2]));
    }
    int64_t *dst[3] = {g->q, g->k, g->v};
    for (int x = 0; x < 3; x++)
        for (int a = 0; a < 4; a++) dst[x][a] = ld[x][a] == 1 && a < 3 ? 0 : ls[x][a];
    /* the output: dense, its physical dims those of sdpa_out_dims */
    ir_shape o = {.rank = 4};
    sdpa_out_dims(p, g, o.d);
    int64_t st[IR_MAX_RANK];
    sdpa_strides(&o, st);
    for (int a = 0; a < 4; a++) g->o[a] = st[p->perm[SDPA_O][a]];
    return ANVIL_OK;
}

static anvil_status sdpa_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const sdpa_params *p = n->params;
    ir_shape sh[5];
    const ir_shape *shp[5] = {NULL};
    for (int i = 0; i < n_in && i < 5; i++)
        if (in[i]) {
            ir_shape_set(&sh[i], in[i]->rank, in[i]->dims);
            shp[i] = &sh[i];
        }
    sdpa_geom g;
    CORE_TRY(sdpa_geometry(n, shp, n_in < 5 ? n_in : 5, &g));
    if (g.sk == 0) {
        memset(out[0]->data, 0, op_tensor_numel(out[0]) * sizeof(float));
        return ANVIL_OK;
    }
    float *s = malloc((size_t)g.sk * sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    const float *q = (const float *)in[0]->data + g.off[0];
    const float *k = (const float *)in[1]->data + g.off[1];
    const float *v = (const float *)in[2]->data + g.off[2];
    const float *mask = g.has_mask ? in[SDPA_MASK]->data : NULL;
    const bool *keep = g.has_keep ? in[SDPA_KEEP]->data : NULL;
    const int64_t coff = sdpa_causal_offset(p, g.sq, g.sk);
    float *o = out[0]->data;
    for (int64_t b = 0; b < g.batch; b++)
        for (int64_t h = 0; h < g.heads; h++)
            for (int64_t i = 0; i < g.sq; i++) {
                const float *qi = q + b * g.q[0] + h * g.q[1] + i * g.q[2];
                float mx = -INFINITY;
                for (int64_t j = 0; j < g.sk; j++) {
                    const float *kj = k + b * g.k[0] + h / g.group * g.k[1] + j * g.k[2];
                    float acc = 0;
                    for (int64_t e = 0; e < g.d; e++) acc += qi[e * g.q[3]] * kj[e * g.k[3]];
                    acc *= p->scale;
                    if (p->softcap > 0) acc = p->softcap * tanhf(acc / p->softcap);
                    if (mask)
                        acc += mask[b * g.mask[0] + h * g.mask[1] + i * g.mask[2] + j * g.mask[3]];
                    if (keep &&
                        keep[b * g.keep[0] + h * g.keep[1] + i * g.keep[2] + j * g.keep[3]] ==
                            p->invert)
                        acc = p->fill;
                    if (p->causal && j > i + coff) acc = -INFINITY;
                    s[j] = acc;
                    if (acc > mx) mx = acc;
                }
                double sum = 0;
                for (int64_t j = 0; j < g.sk; j++) {
                    s[j] = expf(s[j] - mx);
                    sum += s[j];
                }
                float *oi = o + b * g.o[0] + h * g.o[1] + i * g.o[2];
                for (int64_t e = 0; e < g.dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < g.sk; j++)
                        acc += (double)s[j] *
                               v[b * g.v[0] + h / g.group * g.v[1] + j * g.v[2] + e * g.v[3]];
                    oi[e * g.o[3]] = (float)(acc / sum);
                }
            }
    free(s);
    return ANVIL_OK;
}

const op_impl op_impl_sdpa = {.min_inputs = 3,
                              .max_inputs = 5,
                              .min_outputs = 1,
                              .max_outputs = 1,
                              .check = sdpa_check,
                              .infer = sdpa_infer,
                              .run = sdpa_run};
