/* Private helpers shared by the tensor/shape op family (src/ops/tensor/) and the ops elsewhere
 * that move or index elements (einsum, upsample/col2im, If/Loop/Scan, ...). Not part of the ops
 * layer contract: outside src/ops only the data kernels (kernels/cpu/data) include it, for the
 * Slice geometry and the Gather index error they must agree on. All helpers are static inline so
 * each file takes only what it uses.
 *
 * Pointers passed to these helpers are borrowed for the call; nothing here allocates. */
#ifndef ANVIL_OPS_TENSOR_COMMON_H
#define ANVIL_OPS_TENSOR_COMMON_H

#include "ops/ops.h"

#include <stdio.h>
#include <string.h>

/* Sets s to `rank` anonymous unknown dims (rank -1: an unknown rank, as ir_shape_unknown). */
static inline void tensor_shape_unknown_dims(ir_shape *s, int rank) {
    memset(s, 0, sizeof *s);
    s->rank = rank;
    for (int i = 0; i < rank; i++) {
        s->d[i] = IR_DIM_UNKNOWN;
        s->sym[i] = -1;
    }
}

/* Copies dim i of src (value and symbol) into dim j of dst. */
static inline void tensor_dim_copy(ir_shape *dst, int j, const ir_shape *src, int i) {
    dst->d[j] = src->d[i];
    dst->sym[j] = src->d[i] >= 0 ? -1 : src->sym[i];
}

/* Data movers hold any fixed-size dtype; strings and sub-byte types are refused by name. */
static inline anvil_status tensor_check_dtype(const ir_node *n, int input, anvil_dtype dt) {
    if (!core_dtype_supported(dt))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: input %d has dtype %s, which anvil cannot hold in memory; convert "
                        "it to a fixed-size numeric or bool type",
                        ir_node_label(n), input, anvil_dtype_name(dt));
    return ANVIL_OK;
}

/* An integer list input (shape, axes, indices) must have one of the allowed dtypes. */
static inline anvil_status tensor_check_index_dtype(const ir_node *n, int input, const char *what,
                                                    anvil_dtype dt, bool allow_int32) {
    if (dt == ANVIL_DTYPE_INT64 || (allow_int32 && dt == ANVIL_DTYPE_INT32)) return ANVIL_OK;
    return core_err(ANVIL_ERR_SHAPE, "%s: input %d (%s) must be %s but is %s", ir_node_label(n),
                    input, what, allow_int32 ? "INT64 or INT32" : "INT64", anvil_dtype_name(dt));
}

/* Output ranks above ANVIL_MAX_RANK cannot be represented. */
static inline anvil_status tensor_check_rank(const ir_node *n, const char *what, int64_t rank) {
    if (rank > IR_MAX_RANK)
        return core_err(ANVIL_ERR_LIMIT,
                        "%s: %s would have rank %lld, above anvil's limit of %d dimensions",
                        ir_node_label(n), what, (long long)rank, IR_MAX_RANK);
    return ANVIL_OK;
}

/* A 1-D list input whose value inference needs: checks its rank and reads its length when its
 * shape is known (*len = -1 otherwise). */
static inline anvil_status tensor_list_length(const ir_node *n, int input, const char *what,
                                              const op_tinfo *t, int64_t *len) {
    *len = -1;
    if (t->shape.rank < 0) return ANVIL_OK;
    if (t->shape.rank != 1)
        return core_err(ANVIL_ERR_SHAPE, "%s: input %d (%s) must be 1-D but has rank %d",
                        ir_node_label(n), input, what, t->shape.rank);
    *len = t->shape.d[0];
    return ANVIL_OK;
}

/* Reads a 1-D INT32/INT64 tensor given to a kernel into out (at most cap values). */
static inline anvil_status tensor_read_ints(const ir_node *n, int input, const op_tensor *t,
                                            int64_t *out, size_t cap, size_t *count) {
    if (t->dtype != ANVIL_DTYPE_INT64 && t->dtype != ANVIL_DTYPE_INT32)
        return core_err(ANVIL_ERR_RUNTIME, "%s: input %d must be INT64 or INT32 but is %s",
                        ir_node_label(n), input, anvil_dtype_name(t->dtype));
    size_t num = op_tensor_numel(t);
    if (num > cap)
        return core_err(ANVIL_ERR_RUNTIME, "%s: input %d has %zu elements; at most %zu allowed",
                        ir_node_label(n), input, num, cap);
    for (size_t i = 0; i < num; i++) out[i] = core_load_i64(t->dtype, t->data, i);
    *count = num;
    return ANVIL_OK;
}

/* Inference of a shape given as a 1-D INT64 list input (Reshape's shape, ConstantOfShape's input).
 * With its values known they go to want (*k of them) and *known is true; otherwise y gets the
 * list's length as its rank (or an unknown rank) and *known is false. */
static inline anvil_status tensor_infer_shape_list(const ir_node *n, int input, const op_tinfo *t,
                                                   int64_t *want, size_t *k, ir_shape *y,
                                                   bool *known) {
    *known = false;
    CORE_TRY(tensor_check_index_dtype(n, input, "shape", t->dtype, false));
    int64_t len;
    CORE_TRY(tensor_list_length(n, input, "shape", t, &len));
    if (len >= 0) CORE_TRY(tensor_check_rank(n, "the output", len));
    if (!t->value || len < 0) {
        /* the shape is computed at run time: only its length (the rank) may be known */
        if (len >= 0)
            tensor_shape_unknown_dims(y, (int)len);
        else
            ir_shape_unknown(y);
        return ANVIL_OK;
    }
    CORE_TRY(op_value_ints(n, input, t, want, IR_MAX_RANK, k));
    *known = true;
    return ANVIL_OK;
}

/* Reads the INT attribute 'axis' (dflt when absent); negative axes are refused before opset 11. */
static inline anvil_status tensor_attr_axis(const ir_node *n, int64_t dflt, int64_t *axis) {
    CORE_TRY(ir_attr_int(n, "axis", dflt, axis));
    if (*axis < 0 && n->opset < 11)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'axis' is %lld; negative axes are allowed from opset 11 "
                        "(model opset %d)",
                        ir_node_label(n), (long long)*axis, n->opset);
    return ANVIL_OK;
}

/* INVALID_MODEL when the node sets attribute `name`, which exists from opset `since`, at an
 * older opset. */
static inline anvil_status tensor_attr_since(const ir_node *n, const char *name, int since) {
    if (n->opset >= since || !ir_node_attr(n, name)) return ANVIL_OK;
    return core_err(ANVIL_ERR_INVALID_MODEL,
                    "%s: attribute '%s' exists from opset %d (model opset %d)", ir_node_label(n),
                    name, since, n->opset);
}

/* A kernel's index tensor (Gather, GatherElements) must be INT32 or INT64. */
static inline anvil_status tensor_check_run_indices(const ir_node *n, const op_tensor *ix) {
    if (ix->dtype != ANVIL_DTYPE_INT32 && ix->dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_RUNTIME, "%s: indices must be INT32 or INT64 but are %s",
                        ir_node_label(n), anvil_dtype_name(ix->dtype));
    return ANVIL_OK;
}

/* Kernels of ops whose output holds input 0's bytes unchanged (Reshape, Flatten, Squeeze,
 * Unsqueeze). The runtime aliases these buffers; the copy keeps the kernel correct when it is
 * run on its own. */
static inline anvil_status tensor_run_copy(const ir_node *n, const op_tensor *in, op_tensor *out) {
    size_t es = anvil_dtype_size(in->dtype);
    size_t cnt = op_tensor_numel(in);
    if (out->dtype != in->dtype || op_tensor_numel(out) != cnt)
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: output buffer (%zu elements of %s) does not match input (%zu of %s)",
                        ir_node_label(n), op_tensor_numel(out), anvil_dtype_name(out->dtype), cnt,
                        anvil_dtype_name(in->dtype));
    if (cnt && out->data != in->data) memmove(out->data, in->data, cnt * es);
    return ANVIL_OK;
}

/* A dense output filled from a source walked with arbitrary (possibly negative) element strides:
 * out[i0..ik] = src[sum(i_j * stride_j)]. Transpose and Slice are both this. Rows (all dims but
 * the last) are the unit of parallel work. */
typedef struct tensor_strided {
    size_t esize;
    int rank; /* >= 1 */
    int64_t dims[IR_MAX_RANK];
    int64_t stride[IR_MAX_RANK]; /* source stride per output dim, in elements */
    const char *src;             /* source element of output index (0, ..., 0) */
    char *dst;
} tensor_strided;

static inline void tensor_strided_rows(void *arg, size_t begin, size_t end) {
    const tensor_strided *s = arg;
    int last = s->rank - 1;
    size_t inner = (size_t)s->dims[last];
    int64_t es = (int64_t)s->esize;
    for (size_t row = begin; row < end; row++) {
        /* decompose the row number into the leading indices, innermost first */
        size_t rem = row;
        int64_t off = 0;
        for (int k = last - 1; k >= 0; k--) {
            size_t dk = (size_t)s->dims[k];
            off += (int64_t)(rem % dk) * s->stride[k];
            rem /= dk;
        }
        const char *src = s->src + off * es;
        char *dst = s->dst + row * inner * s->esize;
        if (s->stride[last] == 1) {
            memcpy(dst, src, inner * s->esize);
            continue;
        }
        int64_t step = s->stride[last] * es;
        for (size_t i = 0; i < inner; i++)
            core_elem_copy(dst + i * s->esize, src + (int64_t)i * step, s->esize);
    }
}

/* Runs the strided copy; numel is the output's element count (nothing happens when it is 0). */
static inline void tensor_strided_run(op_ctx *ctx, tensor_strided *s, size_t numel) {
    if (numel == 0) return;
    if (s->rank == 0) {
        s->rank = 1;
        s->dims[0] = 1;
        s->stride[0] = 1;
    }
    op_parallel_for(ctx, numel / (size_t)s->dims[s->rank - 1], tensor_strided_rows, s);
}

/* Defines op_impl_<op> for an OP_DATA_DEPENDENT op: its kernel `allocfn` allocates its own
 * outputs (run_alloc), and op_run_via_alloc serves as its plain run. */
#define TENSOR_DATA_DEPENDENT_IMPL(op, min_in, max_in, min_out, max_out, checkfn, inferfn,         \
                                   allocfn)                                                        \
    const op_impl op_impl_##op = {.min_inputs = min_in,                                            \
                                  .max_inputs = max_in,                                            \
                                  .min_outputs = min_out,                                          \
                                  .max_outputs = max_out,                                          \
                                  .flags = OP_DATA_DEPENDENT,                                      \
                                  .check = checkfn,                                                \
                                  .infer = inferfn,                                                \
                                  .run = op_run_via_alloc,                                         \
                                  .run_alloc = allocfn};

/* ---- shared by the tensor ops (split_tile_expand.c, gather_scatter.c, rearrange.c, ...) ------ */

/* An op that exists in the default domain only for opsets [since, until) (until 0: still
 * current). Models importing another opset are refused, naming the op's range. */
static inline anvil_status tensor_check_opset(const ir_node *n, int since, int until) {
    if (n->opset < since)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: the operator exists from opset %d but the model imports opset %d; "
                        "raise the model's opset",
                        ir_node_label(n), since, n->opset);
    if (until > 0 && n->opset >= until)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: the operator was removed from the default domain at opset %d and the "
                        "model imports opset %d; re-export it with the replacement operator",
                        ir_node_label(n), until, n->opset);
    return ANVIL_OK;
}

/* Product of dims[from..to) of a tensor whose size was checked at plan time. */
static inline size_t tensor_dims_prod(const int64_t *dims, int from, int to) {
    size_t p = 1;
    for (int i = from; i < to; i++) p *= (size_t)dims[i];
    return p;
}

/* Row-major element strides of dims (in elements). */
static inline void tensor_strides(const int64_t *dims, int rank, int64_t *stride) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        stride[i] = s;
        s *= dims[i];
    }
}

/* Writes the multi-index of flat element `flat` of a tensor with `dims` as "[i,j,k]" into buf
 * (always NUL-terminated). For error messages. */
static inline const char *tensor_pos_str(const int64_t *dims, int rank, size_t flat, char *buf,
                                         size_t cap) {
    int64_t idx[IR_MAX_RANK] = {0};
    size_t rem = flat;
    for (int d = rank - 1; d >= 0; d--) {
        size_t dk = dims[d] > 0 ? (size_t)dims[d] : 1;
        idx[d] = (int64_t)(rem % dk);
        rem /= dk;
    }
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < rank && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? "," : "", (long long)idx[d]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

/* RUNTIME error for index value v found at flat position `flat` of an index tensor (dims, rank),
 * which had to lie in [lo, hi]. */
static inline anvil_status tensor_index_error(const ir_node *n, const char *what, int64_t v,
                                              const int64_t *dims, int rank, size_t flat,
                                              int64_t lo, int64_t hi) {
    char pos[160];
    return core_err(ANVIL_ERR_RUNTIME,
                    "%s: index %lld at position %s of %s is out of range (valid: %lld..%lld); "
                    "fix the indices input",
                    ir_node_label(n), (long long)v,
                    tensor_pos_str(dims, rank, flat, pos, sizeof pos), what, (long long)lo,
                    (long long)hi);
}

/* ---- shared by BitCast, TensorScatter, CausalConvWithState and TfIdfVectorizer ------------- */

/* UNSUPPORTED unless the model's default-domain opset has the op, which exists from opset `since`
 * (unlike tensor_check_opset, whose INVALID_MODEL the older tensor ops report). */
static inline anvil_status tensor_need_opset(const ir_node *n, int since) {
    if (n->opset >= since) return ANVIL_OK;
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "node '%s' (%s): the op exists from default-domain opset %d, but the model "
                    "imports opset %d; raise the model's opset import",
                    ir_node_label(n), ir_op_name(n->op), since, n->opset);
}

/* Reads the string attribute `name` (dflt when absent) and stores its position in the
 * NULL-terminated list `names` in *choice. Any other value fails with `status`; `expected` spells
 * the accepted values for the message (e.g. "'linear' or 'circular'"). */
static inline anvil_status tensor_attr_choice(const ir_node *n, const char *name, const char *dflt,
                                              const char *const *names, anvil_status status,
                                              const char *expected, int *choice) {
    const char *s = NULL;
    CORE_TRY(ir_attr_string(n, name, dflt, &s));
    for (int i = 0; names[i]; i++) {
        if (strcmp(s, names[i]) == 0) {
            *choice = i;
            return ANVIL_OK;
        }
    }
    return core_err(status, "node '%s' (%s): attribute '%s' is '%s'; expected %s", ir_node_label(n),
                    ir_op_name(n->op), name, s, expected);
}

/* RUNTIME error for Gather index v at flat position t of the indices ix, out of range for axis
 * `axis` of size s (valid: -s..s-1). */
static inline anvil_status tensor_gather_index_error(const ir_node *n, const op_tensor *ix,
                                                     size_t t, int64_t v, int axis, int64_t s) {
    char pos[160];
    return core_err(ANVIL_ERR_RUNTIME,
                    "%s: index %lld at position %s of the indices is out of range for axis %d of "
                    "size %lld (valid: %lld..%lld); fix the indices input",
                    ir_node_label(n), (long long)v,
                    tensor_pos_str(ix->dims, ix->rank, t, pos, sizeof pos), axis, (long long)s,
                    (long long)-s, (long long)s - 1);
}

/* ---- Slice geometry (the reference in tensor/move.c and the data kernels' slice_copy) ------ */

/* A Slice node's attributes, parsed by the reference's check into n->params (arena-owned). */
typedef struct slice_params {
    /* opset < 10 only (arena-owned): the starts/ends/axes attributes, n entries each; a list
     * pointer may be NULL when n is 0 */
    const int64_t *starts, *ends, *axes;
    bool has_axes;
    size_t n;
} slice_params;

/* The slice lists as plain arrays (k entries each; axes/steps NULL when defaulted). */
typedef struct slice_lists {
    int64_t starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes[IR_MAX_RANK], steps[IR_MAX_RANK];
    bool has_axes, has_steps;
    size_t k;
} slice_lists;

/* Per dim of the input: first index read, step, and output count (-1 where the input dim is
 * unknown). Dims no list names keep start 0, step 1, the full count. */
typedef struct slice_plan {
    bool sliced[IR_MAX_RANK];
    int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], count[IR_MAX_RANK];
} slice_plan;

/* Applies the ONNX rules: negative starts/ends count from the back, then clamp into [0, d] for
 * forward steps and [0, d-1] / [-1, d-1] for backward steps, so that INT64_MAX / INT64_MIN mean
 * "to the end" either way. */
static inline anvil_status slice_resolve(const ir_node *n, const int64_t *dims, int rank,
                                         const slice_lists *l, slice_plan *pl) {
    for (int i = 0; i < rank; i++) {
        pl->sliced[i] = false;
        pl->start[i] = 0;
        pl->step[i] = 1;
        pl->count[i] = dims[i];
    }
    if (!l->has_axes && (int64_t)l->k > rank)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: %zu starts given for an input of rank %d; give at most one per dim",
                        ir_node_label(n), l->k, rank);
    for (size_t i = 0; i < l->k; i++) {
        int a = (int)i;
        if (l->has_axes) CORE_TRY(op_norm_axis(n, "axes entry", l->axes[i], rank, &a));
        if (pl->sliced[a])
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: axis %d is sliced twice; list each axis at most once",
                            ir_node_label(n), a);
        int64_t step = l->has_steps ? l->steps[i] : 1;
        if (step == 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: steps entry %zu (axis %d) is 0; steps must be "
                            "nonzero",
                            ir_node_label(n), i, a);
        pl->sliced[a] = true;
        pl->step[a] = step;
        int64_t d = dims[a];
        if (d <= 0) {
            /* unknown size; or an empty dim, where the backward clamp range [0, d-1] is empty */
            pl->count[a] = d < 0 ? -1 : 0;
            continue;
        }
        int64_t s = l->starts[i], e = l->ends[i];
        if (s < 0) s += d;
        if (e < 0) e += d;
        uint64_t span;
        if (step > 0) {
            s = s < 0 ? 0 : (s > d ? d : s);
            e = e < 0 ? 0 : (e > d ? d : e);
            span = e > s ? (uint64_t)(e - s) : 0;
        } else {
            s = s < 0 ? 0 : (s > d - 1 ? d - 1 : s);
            e = e < -1 ? -1 : (e > d - 1 ? d - 1 : e);
            span = s > e ? (uint64_t)(s - e) : 0;
        }
        /* |step| as unsigned so that INT64_MIN works */
        uint64_t ustep = step > 0 ? (uint64_t)step : (uint64_t)0 - (uint64_t)step;
        pl->count[a] = span ? (int64_t)((span - 1) / ustep + 1) : 0;
        pl->start[a] = pl->count[a] ? s : 0;
    }
    return ANVIL_OK;
}

/* Reads the lists from the attributes (opset < 10). */
static inline void slice_lists_from_attrs(const slice_params *p, slice_lists *l) {
    l->k = p->n;
    l->has_axes = p->has_axes;
    l->has_steps = false;
    if (!p->n) return;
    memcpy(l->starts, p->starts, p->n * sizeof(int64_t));
    memcpy(l->ends, p->ends, p->n * sizeof(int64_t));
    if (p->has_axes) memcpy(l->axes, p->axes, p->n * sizeof(int64_t));
}

/* Reads the lists from the plan-time values of inputs 1..4 of in (opset >= 10; starts and ends
 * given, every given list's value known). SHAPE error when the lists' lengths differ. */
static inline anvil_status slice_lists_from_values(const ir_node *n, const op_tinfo *in,
                                                   slice_lists *l) {
    size_t k2 = 0;
    CORE_TRY(op_value_ints(n, 1, &in[1], l->starts, IR_MAX_RANK, &l->k));
    CORE_TRY(op_value_ints(n, 2, &in[2], l->ends, IR_MAX_RANK, &k2));
    bool same = k2 == l->k;
    l->has_axes = op_has_input(n, 3);
    if (l->has_axes) {
        CORE_TRY(op_value_ints(n, 3, &in[3], l->axes, IR_MAX_RANK, &k2));
        same = same && k2 == l->k;
    }
    l->has_steps = op_has_input(n, 4);
    if (l->has_steps) {
        CORE_TRY(op_value_ints(n, 4, &in[4], l->steps, IR_MAX_RANK, &k2));
        same = same && k2 == l->k;
    }
    if (!same)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: starts, ends, axes and steps must have the same length",
                        ir_node_label(n));
    return ANVIL_OK;
}

#endif
