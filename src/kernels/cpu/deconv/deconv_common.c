/* ConvTranspose geometry and the N-D scatter of a column buffer into the output.
 *
 * The attributes are the reference's own (the node's conv_params) and the output size and pads
 * come from the reference's convt_resolve (ops/nn_common.h); the result is compared with the
 * inferred output shape, so any disagreement makes the variants decline the node rather than
 * compute something else. */
#include "deconv.h"

#include "ops/nn_common.h"

#include <string.h>

/* Far beyond real models; keeps every index product inside int64. */
#define DECONV_LIM ((int64_t)1 << 24)

static bool static_f32(const op_tinfo *t, int rank) {
    return t->dtype == ANVIL_DTYPE_FLOAT32 && ir_shape_is_static(&t->shape) &&
           t->shape.rank == rank;
}

bool deconv_geom_of(const kern_node *kn, deconv_geom *g) {
    memset(g, 0, sizeof *g);
    const ir_node *n = kn->node;
    if (n->op != IR_OP_CONVTRANSPOSE || kn->n_in < 2 || kn->n_out < 1) return false;
    const int rank = kn->in[0].shape.rank;
    if (rank < 3 || rank > DECONV_MAX_SP + 2) return false;
    if (!static_f32(&kn->in[0], rank) || !static_f32(&kn->in[1], rank) ||
        !static_f32(&kn->out[0], rank))
        return false;
    g->has_bias = kn->n_in > 2 && n->n_inputs > 2 && n->inputs[2] != IR_NONE;
    if (g->has_bias && !static_f32(&kn->in[2], 1)) return false;
    const int nsp = rank - 2;
    const int64_t *xd = kn->in[0].shape.d, *wd = kn->in[1].shape.d, *yd = kn->out[0].shape.d;

    /* the reference's parsed attributes; their counts must fit nsp before they are indexed */
    const conv_params *p = n->params;
    if (!p || nn_window_check_nsp(n, &p->win, nsp) != ANVIL_OK ||
        (p->n_output_padding && p->n_output_padding != (size_t)nsp))
        return false;
    const nn_window *w = &p->win;
    g->nsp = nsp;
    g->n = xd[0];
    g->c = xd[1];
    g->mg = wd[1];
    g->group = p->group;
    if (g->group > DECONV_LIM || wd[0] != g->c || g->c % g->group) return false;
    g->cg = g->c / g->group;
    g->m = g->mg * g->group;
    if (g->mg > DECONV_LIM || g->c > DECONV_LIM || yd[0] != g->n || yd[1] != g->m) return false;
    if (g->has_bias && kn->in[2].shape.d[0] != g->m) return false;
    g->in_size = g->out_size = g->k_size = 1;
    for (int d = 0; d < nsp; d++) {
        g->in[d] = xd[d + 2];
        g->k[d] = wd[d + 2];
        g->s[d] = w->n_strides ? w->strides[d] : 1;
        g->d[d] = w->n_dilations ? w->dilations[d] : 1;
        int64_t op = p->n_output_padding ? p->output_padding[d] : 0;
        if (w->n_kernel && w->kernel[d] != g->k[d]) return false;
        /* small enough that the geometry's products stay inside int64 */
        if (g->in[d] > DECONV_LIM || g->k[d] < 1 || g->k[d] > 64 || g->s[d] > DECONV_LIM ||
            g->d[d] > DECONV_LIM || op > DECONV_LIM)
            return false;
    }
    nn_geom geo;
    if (convt_resolve(n, p, nsp, xd + 2, wd + 2, &geo) != ANVIL_OK) return false;
    for (int d = 0; d < nsp; d++) {
        if (geo.out[d] > DECONV_LIM || geo.pad_begin[d] > DECONV_LIM ||
            geo.pad_end[d] > DECONV_LIM || geo.out[d] != yd[d + 2])
            return false;
        g->out[d] = geo.out[d];
        g->pb[d] = geo.pad_begin[d];
        g->in_size *= g->in[d];
        g->out_size *= g->out[d];
        g->k_size *= g->k[d];
    }
    /* the GEMM's rows (mg * taps) and the planes stay well inside int64 */
    return g->k_size <= 4096 && g->mg * g->k_size <= DECONV_LIM;
}

bool deconv_geom_disjoint(const deconv_geom *g) {
    for (int d = 0; d < g->nsp; d++)
        if (g->s[d] != g->k[d] || g->d[d] != 1 || g->pb[d] != 0 || g->out[d] < g->in[d] * g->k[d])
            return false;
    return true;
}

/* ---- row kernels ------------------------------------------------------------------------------
 */

const deconv_rows *deconv_rows_for(const core_hw *hw) {
    return kern_isa_ok(KERN_NEEDS_AVX512, hw) ? &deconv_rows_avx512 : &deconv_rows_portable;
}

/* ---- N-D scatter ------------------------------------------------------------------------------
 * The outer dims (all but the last) are walked tap by tap and position by position; the last dim
 * goes to a row kernel with all of its taps at once, so that stride-2 taps can be interleaved
 * into contiguous stores. */

/* Row-major strides of dims[0..n). */
static void strides_of(int n, const int64_t *dims, int64_t *str) {
    int64_t s = 1;
    for (int d = n - 1; d >= 0; d--) {
        str[d] = s;
        s *= dims[d];
    }
}

/* Calls the row kernel (add: rk->add, else rk->set) for every outer tap and every outer input
 * position in [r0, r1) (dim 0) whose outer output position lies in [o0, o1) (dim 0) and inside
 * the output (the other outer dims). */
static void scatter(const deconv_geom *g, const deconv_rows *rk, bool add, const float *colm,
                    int64_t ldcol, int64_t r0, int64_t r1, int64_t o0, int64_t o1, float bias,
                    float *y) {
    const int nsp = g->nsp, L = nsp - 1;
    const int64_t kw = g->k[L];
    if (nsp == 1) {
        /* the chunk is a piece of the only (last) dim */
        const int64_t base = r0 * g->s[0] - g->pb[0];
        if (add)
            rk->add(colm, ldcol, kw, g->s[0], g->d[0], r1 - r0, base, o0, o1, y);
        else
            rk->set(colm, ldcol, kw, r1 - r0, bias, y + base);
        return;
    }
    int64_t xin[DECONV_MAX_SP], ystr[DECONV_MAX_SP], xstr[DECONV_MAX_SP];
    memcpy(xin, g->in, sizeof xin);
    xin[0] = r1 - r0;
    strides_of(nsp, xin, xstr);
    strides_of(nsp, g->out, ystr);
    const int64_t taps_outer = g->k_size / kw, W = g->in[L], OW = g->out[L];
    int64_t kidx[DECONV_MAX_SP] = {0};
    for (int64_t t = 0; t < taps_outer; t++) {
        int64_t lo[DECONV_MAX_SP], hi[DECONV_MAX_SP], off[DECONV_MAX_SP], pos[DECONV_MAX_SP];
        bool empty = false;
        for (int d = 0; d < L; d++) {
            off[d] = kidx[d] * g->d[d] - g->pb[d];
            if (d == 0) /* q = (r0 + p) * s + off must lie in [o0, o1) */
                nn_valid_range(r1 - r0, g->s[0], r0 * g->s[0] + off[0] - o0, o1 - o0, &lo[0],
                               &hi[0]);
            else
                nn_valid_range(g->in[d], g->s[d], off[d], g->out[d], &lo[d], &hi[d]);
            if (lo[d] >= hi[d]) empty = true;
            pos[d] = lo[d];
        }
        const float *ct = colm + t * kw * ldcol;
        while (!empty) {
            int64_t so = 0, yo = 0;
            for (int d = 0; d < L; d++) {
                int64_t q = (d == 0 ? r0 + pos[0] : pos[d]) * g->s[d] + off[d];
                so += pos[d] * xstr[d];
                yo += q * ystr[d];
            }
            if (add)
                rk->add(ct + so, ldcol, kw, g->s[L], g->d[L], W, -g->pb[L], 0, OW, y + yo);
            else
                rk->set(ct + so, ldcol, kw, W, bias, y + yo);
            int d = L - 1;
            while (d >= 0 && ++pos[d] == hi[d]) {
                pos[d] = lo[d];
                d--;
            }
            if (d < 0) break;
        }
        for (int d = L - 1; d >= 0 && ++kidx[d] == g->k[d]; d--) kidx[d] = 0;
    }
}

void deconv_col2im_add(const deconv_geom *g, const deconv_rows *rk, const float *colm,
                       int64_t ldcol, int64_t r0, int64_t r1, int64_t o0, int64_t o1, float *y) {
    scatter(g, rk, true, colm, ldcol, r0, r1, o0, o1, 0.0f, y);
}

void deconv_col2im_set(const deconv_geom *g, const deconv_rows *rk, const float *colm,
                       int64_t ldcol, int64_t r0, int64_t r1, float bias, float *y) {
    scatter(g, rk, false, colm, ldcol, r0, r1, 0, g->out[0], bias, y);
}

void deconv_fill_rows(const deconv_geom *g, int64_t o0, int64_t o1, float bias, float *y) {
    const int64_t row = g->out_size / g->out[0];
    for (int64_t i = o0 * row; i < o1 * row; i++) y[i] = bias;
}

void deconv_fill_uncovered(const deconv_geom *g, float bias, float *y) {
    const int nsp = g->nsp, L = nsp - 1;
    bool any = false;
    for (int d = 0; d < nsp; d++) any |= g->out[d] > g->in[d] * g->k[d];
    if (!any) return;
    /* walk the output rows (every outer position); a row outside the covered box in an outer
     * dim is all bias, any other row from the end of its covered part */
    const int64_t rows = g->out_size / g->out[L], OW = g->out[L], cw = g->in[L] * g->k[L];
    int64_t pos[DECONV_MAX_SP] = {0};
    for (int64_t r = 0; r < rows; r++) {
        bool outside = false;
        for (int d = 0; d < L; d++) outside |= pos[d] >= g->in[d] * g->k[d];
        for (int64_t i = outside ? 0 : cw; i < OW; i++) y[r * OW + i] = bias;
        for (int d = L - 1; d >= 0 && ++pos[d] == g->out[d]; d--) pos[d] = 0;
    }
}
