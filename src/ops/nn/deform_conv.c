/* DeformConv (opset 19): a convolution whose every kernel tap reads the input at its regular
 * position plus a learned fractional offset, optionally scaled by a mask. The taps are read by
 * N-linear interpolation in double through core_load_f64/core_store_f64, which keeps one code path
 * for every float dtype; this is a reference kernel where clarity wins over speed. */
#include "ops/nn_common.h"
#include "ops/tensor_common.h"

#include <math.h>

/* ---- DeformConv ------------------------------------------------------------------------------ */

typedef struct deform_params {
    nn_window win;
    int64_t group, offset_group;
} deform_params;

static anvil_status deform_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 19, 0));
    OP_PARAMS_NEW(g, deform_params, p);
    if (ir_node_attr(n, "auto_pad") || ir_node_attr(n, "ceil_mode"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: DeformConv has no attribute '%s'; give explicit 'pads'",
                        ir_node_label(n), ir_node_attr(n, "auto_pad") ? "auto_pad" : "ceil_mode");
    CORE_TRY(nn_window_parse(n, false, true, false, &p->win));
    CORE_TRY(ir_attr_int(n, "group", 1, &p->group));
    CORE_TRY(ir_attr_int(n, "offset_group", 1, &p->offset_group));
    if (p->group < 1 || p->group > NN_MAX_ATTR || p->offset_group < 1 ||
        p->offset_group > NN_MAX_ATTR)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: group is %lld and offset_group is %lld; both must be in 1..%lld",
                        ir_node_label(n), (long long)p->group, (long long)p->offset_group,
                        (long long)NN_MAX_ATTR);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status deform_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const deform_params *p = n->params;
    static const char *const names[] = {"X", "W", "offset", "B", "mask"};
    for (int i = 0; i < n_in && i < 5; i++) {
        if (!op_has_input(n, i)) continue;
        CORE_TRY(nn_check_float(n, i, names[i], in[i].dtype));
        if (in[i].dtype != in[0].dtype)
            return core_err(ANVIL_ERR_SHAPE, "%s: input %d (%s) is %s but X is %s; they must match",
                            ir_node_label(n), i, names[i], anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(in[0].dtype));
    }
    const ir_shape *x = &in[0].shape, *w = &in[1].shape, *off = &in[2].shape;
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    int rank = x->rank >= 0 ? x->rank : w->rank >= 0 ? w->rank : off->rank;
    if (rank < 0) return ANVIL_OK;
    int nsp = rank - 2;
    if (nsp < 1 || nsp > NN_MAX_SPATIAL)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: rank %d gives %d spatial dims; expected 1 to %d (N x C x D1 x ...)",
                        ir_node_label(n), rank, nsp, NN_MAX_SPATIAL);
    const ir_shape *all[3] = {x, w, off};
    for (int i = 0; i < 3; i++)
        if (all[i]->rank >= 0 && all[i]->rank != rank)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d (%s) has rank %d but the op works on rank %d; X, W and "
                            "offset must have the same rank",
                            ir_node_label(n), i, names[i], all[i]->rank, rank);
    if (x->rank >= 0 && w->rank >= 0 && x->d[1] >= 0 && w->d[1] >= 0 &&
        x->d[1] != w->d[1] * p->group)
        return core_err(
            ANVIL_ERR_SHAPE, "%s: X has %lld channels but W expects %lld per group x %lld groups",
            ir_node_label(n), (long long)x->d[1], (long long)w->d[1], (long long)p->group);
    if (x->rank >= 0 && x->d[1] >= 0 && x->d[1] % p->offset_group)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: X has %lld channels, not divisible by offset_group %lld",
                        ir_node_label(n), (long long)x->d[1], (long long)p->offset_group);
    if (w->rank >= 0 && w->d[0] >= 0 && w->d[0] % p->group)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: W has %lld output channels, not divisible by group %lld",
                        ir_node_label(n), (long long)w->d[0], (long long)p->group);
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, rank);
    if (x->rank >= 0) tensor_dim_copy(y, 0, x, 0);
    if (w->rank >= 0) tensor_dim_copy(y, 1, w, 0);
    int64_t kernel[NN_MAX_SPATIAL];
    for (int d = 0; d < nsp; d++) {
        kernel[d] = p->win.n_kernel ? p->win.kernel[d] : w->rank >= 0 ? w->d[2 + d] : -1;
        if (p->win.n_kernel && w->rank >= 0 && w->d[2 + d] >= 0 && w->d[2 + d] != kernel[d])
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: kernel_shape[%d] is %lld but W's spatial dim is %lld",
                            ir_node_label(n), d, (long long)kernel[d], (long long)w->d[2 + d]);
        if (kernel[d] < 0 || x->rank < 0) return ANVIL_OK;
    }
    nn_geom geo;
    CORE_TRY(nn_window_resolve(n, &p->win, nsp, x->d + 2, kernel, false, &geo));
    int64_t kprod = 1;
    for (int d = 0; d < nsp; d++) kprod *= kernel[d];
    if (off->rank >= 0 && off->d[1] >= 0 && off->d[1] != p->offset_group * kprod * nsp)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: offset has %lld channels; expected offset_group x kernel size x "
                        "spatial dims = %lld",
                        ir_node_label(n), (long long)off->d[1],
                        (long long)(p->offset_group * kprod * nsp));
    const ir_shape *m = n_in > 4 && op_has_input(n, 4) ? &in[4].shape : NULL;
    if (m && m->rank >= 0 &&
        (m->rank != rank || (m->d[1] >= 0 && m->d[1] != p->offset_group * kprod)))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: mask must be (N, %lld, out spatial...) with rank %d; got rank %d",
                        ir_node_label(n), (long long)(p->offset_group * kprod), rank, m->rank);
    const ir_shape *b = n_in > 3 && op_has_input(n, 3) ? &in[3].shape : NULL;
    if (b && b->rank >= 0 &&
        (b->rank != 1 || (w->rank >= 0 && b->d[0] >= 0 && w->d[0] >= 0 && b->d[0] != w->d[0])))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: B must be a 1-D list of one bias per output channel; got rank %d",
                        ir_node_label(n), b->rank);
    const ir_shape *per_pos[2] = {off, m};
    for (int k = 0; k < 2; k++)
        if (per_pos[k] && per_pos[k]->rank >= 0 && per_pos[k]->d[0] >= 0 && x->d[0] >= 0 &&
            per_pos[k]->d[0] != x->d[0])
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: %s has batch %lld but X has batch %lld; they must match",
                            ir_node_label(n), k ? "mask" : "offset", (long long)per_pos[k]->d[0],
                            (long long)x->d[0]);
    for (int d = 0; d < nsp; d++) {
        y->d[2 + d] = geo.out[d];
        const ir_shape *chk[2] = {off, m};
        for (int k = 0; k < 2; k++)
            if (chk[k] && chk[k]->rank >= 0 && chk[k]->d[2 + d] >= 0 && geo.out[d] >= 0 &&
                chk[k]->d[2 + d] != geo.out[d])
                return core_err(
                    ANVIL_ERR_SHAPE,
                    "%s: %s has spatial dim %d of %lld but the convolution output has %lld",
                    ir_node_label(n), k ? "mask" : "offset", d, (long long)chk[k]->d[2 + d],
                    (long long)geo.out[d]);
    }
    return ANVIL_OK;
}

/* N-linear read of one channel at fractional position pos[]; corners outside
 * read 0. */
static double deform_sample(anvil_dtype dt, const void *data, size_t base, int nsp,
                            const int64_t *len, const int64_t *str, const double *pos) {
    int64_t lo[NN_MAX_SPATIAL];
    double t[NN_MAX_SPATIAL];
    for (int i = 0; i < nsp; i++) {
        if (!(pos[i] > -1.0 && pos[i] < (double)len[i])) return 0;
        double f = floor(pos[i]);
        lo[i] = (int64_t)f;
        t[i] = pos[i] - f;
    }
    double acc = 0;
    for (unsigned c = 0; c < (1u << nsp); c++) {
        double wt = 1;
        int64_t off = 0;
        bool inside = true;
        for (int i = 0; i < nsp; i++) {
            bool hi = (c >> i) & 1u;
            int64_t v = lo[i] + (hi ? 1 : 0);
            wt *= hi ? t[i] : 1 - t[i];
            if (v < 0 || v >= len[i]) inside = false;
            off += v * str[i];
        }
        if (inside && wt != 0) acc += wt * core_load_f64(dt, data, base + (size_t)off);
    }
    return acc;
}

static anvil_status deform_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const deform_params *p = n->params;
    const op_tensor *x = in[0], *w = in[1], *off = in[2];
    const op_tensor *b = n_in > 3 ? in[3] : NULL, *m = n_in > 4 ? in[4] : NULL;
    op_tensor *y = out[0];
    int nsp = x->rank - 2;
    int64_t kernel[NN_MAX_SPATIAL];
    for (int d = 0; d < nsp; d++) kernel[d] = w->dims[2 + d];
    nn_geom geo;
    CORE_TRY(nn_window_resolve(n, &p->win, nsp, x->dims + 2, kernel, false, &geo));
    int64_t N = x->dims[0], C = x->dims[1], OC = w->dims[0], G = p->group, OG = p->offset_group;
    int64_t cpg = C / G, ocpg = OC / G, cpog = C / OG;
    int64_t xstr[NN_MAX_SPATIAL];
    tensor_strides(x->dims + 2, nsp, xstr);
    size_t in_sp = tensor_dims_prod(x->dims, 2, x->rank);
    size_t out_sp = tensor_dims_prod(y->dims, 2, y->rank);
    size_t ksz = tensor_dims_prod(kernel, 0, nsp);
    for (int64_t bn = 0; bn < N; bn++)
        for (int64_t oc = 0; oc < OC; oc++) {
            int64_t grp = oc / ocpg;
            for (size_t o = 0; o < out_sp; o++) {
                int64_t opos[NN_MAX_SPATIAL];
                size_t rem = o;
                for (int d = nsp - 1; d >= 0; d--) {
                    opos[d] = (int64_t)(rem % (size_t)y->dims[2 + d]);
                    rem /= (size_t)y->dims[2 + d];
                }
                double acc = b ? core_load_f64(b->dtype, b->data, (size_t)oc) : 0;
                for (int64_t ci = 0; ci < cpg; ci++) {
                    int64_t c = grp * cpg + ci, og = c / cpog;
                    size_t xbase = (size_t)(bn * C + c) * in_sp;
                    for (size_t k = 0; k < ksz; k++) {
                        /* offset channel layout: (offset_group, kernel..., spatial dim) */
                        size_t och = ((size_t)og * ksz + k) * (size_t)nsp;
                        double pos[NN_MAX_SPATIAL];
                        size_t kr = k;
                        for (int d = nsp - 1; d >= 0; d--) {
                            int64_t kd = (int64_t)(kr % (size_t)kernel[d]);
                            kr /= (size_t)kernel[d];
                            double shift = core_load_f64(
                                off->dtype, off->data,
                                ((size_t)bn * (size_t)off->dims[1] + och + (size_t)d) * out_sp + o);
                            pos[d] = (double)(opos[d] * geo.stride[d] - geo.pad_begin[d] +
                                              kd * geo.dil[d]) +
                                     shift;
                        }
                        double v =
                            deform_sample(x->dtype, x->data, xbase, nsp, x->dims + 2, xstr, pos);
                        if (m)
                            v *= core_load_f64(
                                m->dtype, m->data,
                                ((size_t)bn * (size_t)m->dims[1] + (size_t)og * ksz + k) * out_sp +
                                    o);
                        acc += v * core_load_f64(w->dtype, w->data,
                                                 ((size_t)oc * (size_t)cpg + (size_t)ci) * ksz + k);
                    }
                }
                core_store_f64(y->dtype, y->data,
                               ((size_t)bn * (size_t)OC + (size_t)oc) * out_sp + o, acc);
            }
        }
    return ANVIL_OK;
}

const op_impl op_impl_deformconv = {
    .min_inputs = 3,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = deform_check,
    .infer = deform_infer,
    .run = deform_run,
};
