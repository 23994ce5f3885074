/* Private to the elementwise op families (src/ops/math/arithmetic.c, unary_math.c, logic.c,
 * activation.c, softmax.c; tensor/cast.c): the dtype lists their kernels are generated over, the
 * broadcasting iterator, the unary driver, dtype checks, the op_impl shapes they share, and float
 * -> integer conversions with defined results. Nothing outside src/ops includes this header.
 * Everything declared here (non-inline) is defined in math/arithmetic.c. */
#ifndef ANVIL_OPS_ELTWISE_COMMON_H
#define ANVIL_OPS_ELTWISE_COMMON_H

#include "ops/ops.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* ---- dtype lists ---------------------------------------------------------------------------
 *
 * Each list calls X(op, EXPR, tag, DT, T, C, LD, ST) once per dtype:
 *   op, EXPR  passed through unchanged (the op's name and its expression macro);
 *   tag       short name used to build function names (f32, i64, ...);
 *   DT        suffix of the anvil_dtype enum (FLOAT32, INT64, ...);
 *   T         storage type of one element;
 *   C         type the arithmetic is done in (float for f16/bf16);
 *   LD, ST    convert one element T -> C and C -> T. */
#define ELT_ID(x) (x)

#define ELT_FLOAT_TYPES(X, op, EXPR)                                                               \
    X(op, EXPR, f32, FLOAT32, float, float, ELT_ID, ELT_ID)                                        \
    X(op, EXPR, f64, FLOAT64, double, double, ELT_ID, ELT_ID)                                      \
    X(op, EXPR, f16, FLOAT16, uint16_t, float, core_f16_to_f32, core_f32_to_f16)                   \
    X(op, EXPR, bf16, BFLOAT16, uint16_t, float, core_bf16_to_f32, core_f32_to_bf16)

/* An integer dtype computes in its own storage type T and loads and stores unchanged. */
#define ELT_INT(X, op, EXPR, tag, DT, T) X(op, EXPR, tag, DT, T, T, ELT_ID, ELT_ID)

#define ELT_SINT_TYPES(X, op, EXPR)                                                                \
    ELT_INT(X, op, EXPR, i8, INT8, int8_t)                                                         \
    ELT_INT(X, op, EXPR, i16, INT16, int16_t)                                                      \
    ELT_INT(X, op, EXPR, i32, INT32, int32_t) ELT_INT(X, op, EXPR, i64, INT64, int64_t)

#define ELT_UINT_TYPES(X, op, EXPR)                                                                \
    ELT_INT(X, op, EXPR, u8, UINT8, uint8_t)                                                       \
    ELT_INT(X, op, EXPR, u16, UINT16, uint16_t)                                                    \
    ELT_INT(X, op, EXPR, u32, UINT32, uint32_t) ELT_INT(X, op, EXPR, u64, UINT64, uint64_t)

#define ELT_NUMERIC_TYPES(X, op, EXPR)                                                             \
    ELT_FLOAT_TYPES(X, op, EXPR) ELT_SINT_TYPES(X, op, EXPR) ELT_UINT_TYPES(X, op, EXPR)

/* Bit (1u << dtype) of every dtype in a list, for op_elt_require(). */
#define ELT_BIT(op, EXPR, tag, DT, T, C, LD, ST) | (1u << ANVIL_DTYPE_##DT)
#define ELT_MASK_FLOAT (0u ELT_FLOAT_TYPES(ELT_BIT, _, _))
#define ELT_MASK_SINT (0u ELT_SINT_TYPES(ELT_BIT, _, _))
#define ELT_MASK_UINT (0u ELT_UINT_TYPES(ELT_BIT, _, _))
#define ELT_MASK_NUMERIC (ELT_MASK_FLOAT | ELT_MASK_SINT | ELT_MASK_UINT)

/* Per-dtype kernel tables are indexed by anvil_dtype; every dtype value is below this. */
#define ELT_DTYPE_SLOTS 32

/* Below this many elements a kernel runs on the calling thread: waking the pool for a small
 * tensor costs more than the work. */
#define ELT_PARALLEL_MIN ((size_t)1 << 15)

/* ctx for a kernel over numel elements: NULL (serial) below ELT_PARALLEL_MIN. */
static inline op_ctx *op_elt_par_ctx(op_ctx *ctx, size_t numel) {
    return numel >= ELT_PARALLEL_MIN ? ctx : NULL;
}

/* ---- kernels' row functions ---------------------------------------------------------------- */

/* Unary: out[i] = f(in[i]) for i < n. out may equal in. param: op-specific, borrowed. */
typedef void (*op_elt_row1)(void *out, const void *in, size_t n, const void *param);

/* Binary: out[i] = f(a[i * sa], b[i * sb]) for i < n, where sa and sb are 0 (the operand is
 * broadcast along the row) or 1 (it is contiguous). out is contiguous and may equal a. */
typedef void (*op_elt_row2)(void *out, const void *a, const void *b, ptrdiff_t sa, ptrdiff_t sb,
                            size_t n);

/* Parameters of the unary activations (what each field means is up to the op). */
typedef struct op_elt_param {
    double alpha, beta;
    bool has_lo, has_hi;
    /* one element of the tensor's own dtype each (Clip bounds); aligned for any element type */
    _Alignas(8) unsigned char lo[8];
    _Alignas(8) unsigned char hi[8];
} op_elt_param;

/* Kernel tables' entry for dt; NULL when rows is NULL, dt is out of range or has no kernel. */
static inline op_elt_row1 op_elt_row1_for(const op_elt_row1 *rows, anvil_dtype dt) {
    return rows && (unsigned)dt < ELT_DTYPE_SLOTS ? rows[dt] : NULL;
}
static inline op_elt_row2 op_elt_row2_for(const op_elt_row2 *rows, anvil_dtype dt) {
    return rows && (unsigned)dt < ELT_DTYPE_SLOTS ? rows[dt] : NULL;
}

/* Chooses the libm function by the argument's type: ELT_MATH(exp, x) is expf(x) for float and
 * exp(x) for double. */
#define ELT_MATH(fn, x) _Generic((x), double : fn, default : fn##f)(x)
#define ELT_MATH2(fn, x, y) _Generic((x), double : fn, default : fn##f)((x), (y))

/* Defines `static void name` (an op_elt_row1) reading elements of storage type T, loaded through
 * LD into the compute type C, and writing storage type TO through OST: o[i] = OST(EXPR(C, v, p)),
 * where v is the element in the compute type and p the const op_elt_param * handed in. */
#define ELT_DEF_ROW1_TO(name, EXPR, T, C, LD, TO, OST)                                             \
    static void name(void *out, const void *in, size_t n, const void *param) {                     \
        TO *o = out;                                                                               \
        const T *x = in;                                                                           \
        const op_elt_param *p = param;                                                             \
        (void)p;                                                                                   \
        for (size_t i = 0; i < n; i++) {                                                           \
            C v = (C)LD(x[i]);                                                                     \
            o[i] = OST(EXPR(C, v, p));                                                             \
        }                                                                                          \
    }

/* Defines `static void <op>_row_<tag>` (an op_elt_row1 whose output has the input's dtype). */
#define ELT_DEF_ROW1(op, EXPR, tag, DT, T, C, LD, ST)                                              \
    ELT_DEF_ROW1_TO(op##_row_##tag, EXPR, T, C, LD, T, ST)

/* A table entry `[ANVIL_DTYPE_<DT>] = <op>_row_<tag>,` for a designated-initializer table. */
#define ELT_ROW_ENTRY(op, EXPR, tag, DT, T, C, LD, ST) [ANVIL_DTYPE_##DT] = op##_row_##tag,

/* `static const` <op>_rows, the table of <op>_row_<tag> over the dtype list TYPES (e.g.
 * ELT_FLOAT_TYPES), of unary (ROW1) or binary (ROW2) row functions. */
#define ELT_ROW1_TABLE(op, TYPES)                                                                  \
    static const op_elt_row1 op##_rows[ELT_DTYPE_SLOTS] = {TYPES(ELT_ROW_ENTRY, op, _)};
#define ELT_ROW2_TABLE(op, TYPES)                                                                  \
    static const op_elt_row2 op##_rows[ELT_DTYPE_SLOTS] = {TYPES(ELT_ROW_ENTRY, op, _)};

/* A unary op defined for the float dtypes only: its row functions (ELT_DEF_ROW1) and <op>_rows. */
#define ELT_FLOAT_UNARY(op, EXPR)                                                                  \
    ELT_FLOAT_TYPES(ELT_DEF_ROW1, op, EXPR)                                                        \
    ELT_ROW1_TABLE(op, ELT_FLOAT_TYPES)
/* A unary op over the float (EF) and signed integer (ES) dtypes: row functions and <op>_rows. */
#define ELT_SIGNED_UNARY(op, EF, ES)                                                               \
    ELT_FLOAT_TYPES(ELT_DEF_ROW1, op, EF)                                                          \
    ELT_SINT_TYPES(ELT_DEF_ROW1, op, ES)                                                           \
    static const op_elt_row1 op##_rows[ELT_DTYPE_SLOTS] = {                                        \
        ELT_FLOAT_TYPES(ELT_ROW_ENTRY, op, _) ELT_SINT_TYPES(ELT_ROW_ENTRY, op, _)};
/* A unary op over every numeric dtype (float EF, signed ES, unsigned EU): row functions and
 * <op>_rows. */
#define ELT_NUMERIC_UNARY(op, EF, ES, EU)                                                          \
    ELT_FLOAT_TYPES(ELT_DEF_ROW1, op, EF)                                                          \
    ELT_SINT_TYPES(ELT_DEF_ROW1, op, ES)                                                           \
    ELT_UINT_TYPES(ELT_DEF_ROW1, op, EU)                                                           \
    ELT_ROW1_TABLE(op, ELT_NUMERIC_TYPES)

/* ---- drivers ------------------------------------------------------------------------------- */

/* Runs fn over all elements of in into out (same dtype and element count; out may be in),
 * in parallel chunks when the tensor is large. All tensors borrowed. */
anvil_status op_elt_unary_run(const ir_node *n, const op_tensor *in, op_tensor *out, op_elt_row1 fn,
                              const void *param, op_ctx *ctx);

/* The loop of op_elt_unary_run without its checks: fn over the elements of in into out, which
 * holds as many elements of a dtype that may differ from in's (fn knows both). */
void op_elt_map(const op_tensor *in, op_tensor *out, op_elt_row1 fn, const void *param,
                op_ctx *ctx);

/* Numpy broadcasting: out's dims must be the broadcast of a's and b's dims (as inference
 * computed them). Collapses the problem to the fewest dims, then walks the output in rows whose
 * operands are contiguous or broadcast scalars, calling fn once per row; large outputs are split
 * across threads. a and b may have different dtypes (fn knows them). out may alias a when their
 * shapes are equal. All tensors borrowed. */
anvil_status op_elt_binary_run(const ir_node *n, const op_tensor *a, const op_tensor *b,
                               op_tensor *out, op_elt_row2 fn, op_ctx *ctx);

/* Dense element strides of t (input `which` of n) aligned to out's rank, 0 along the dims where t
 * has size 1 or that t lacks. INTERNAL error unless t broadcasts to out: kernels index by these
 * strides, so a mismatch would read out of bounds. */
anvil_status op_elt_bcast_strides(const ir_node *n, int which, const op_tensor *t,
                                  const op_tensor *out, int64_t *s);

/* Variadic ops (Max, Min, Sum, Mean): INTERNAL error unless fn exists and every input is present
 * with input 0's dtype; then folds the inputs pairwise into out: out = f(x0, x1), then
 * out = f(out, xk). A single input gives f(x0, x0). */
anvil_status op_elt_variadic_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *out, op_elt_row2 fn, op_ctx *ctx);

/* OK if dt's bit is in mask; otherwise UNSUPPORTED naming the node, the input, the dtype and the
 * dtypes the op accepts. */
anvil_status op_elt_require(const ir_node *n, int input, anvil_dtype dt, uint32_t mask);

/* Shape inference of a unary elementwise op: input 0's dtype must be in mask; output 0 gets
 * input 0's dtype and shape (symbolic dims kept). */
anvil_status op_elt_unary_infer(const ir_node *n, const op_tinfo *in, int n_in, op_tinfo *out,
                                int n_out, uint32_t mask);

/* A check() for ops without attributes. */
anvil_status op_elt_check_none(ir_graph *g, ir_node *n);

/* A check() for variadic ops without attributes: every input is required (none omitted). */
anvil_status op_elt_check_all_inputs(ir_graph *g, ir_node *n);

/* SHAPE error unless input i has input 0's dtype. */
anvil_status op_elt_same_dtype(const ir_node *n, const op_tinfo *in, int i);

/* Shape inference of a variadic op: input 0's dtype must be in mask and every input must have it;
 * output 0 gets that dtype and the broadcast of all shapes. With `equal` (Sum and Mean before
 * opset 8) known shapes must be equal, and a SHAPE error says so. */
anvil_status op_elt_variadic_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, uint32_t mask, bool equal);

/* ---- unary ops described by a table ----------------------------------------------------------
 *
 * A family's unary ops share one infer and one run: a lookup maps the node's op to its kernels
 * and the dtypes it accepts. */

/* One unary elementwise op: its kernels by dtype (NULL: not such an op), the dtypes it accepts
 * and the first opset whose schema has it (0 where the family's check() sees to it). */
typedef struct op_elt_unary {
    const op_elt_row1 *rows;
    uint32_t mask;
    int since;
} op_elt_unary;

/* Defines `static` <prefix>_infer and <prefix>_run for the unary ops whose op_elt_unary is
 * LOOKUP(op) (a function of ir_op); run hands n->params to the row functions. */
#define ELT_DEF_UNARY_FNS(prefix, LOOKUP)                                                          \
    static anvil_status prefix##_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,    \
                                       int n_in, op_tinfo *out, int n_out) {                       \
        (void)g;                                                                                   \
        return op_elt_unary_infer(n, in, n_in, out, n_out, LOOKUP(n->op).mask);                    \
    }                                                                                              \
    static anvil_status prefix##_run(const ir_node *n, const op_tensor *const *in, int n_in,       \
                                     op_tensor *const *out, int n_out, op_ctx *ctx) {              \
        (void)n_in;                                                                                \
        (void)n_out;                                                                               \
        op_elt_row1 fn = op_elt_row1_for(LOOKUP(n->op).rows, in[0]->dtype);                        \
        return op_elt_unary_run(n, in[0], out[0], fn, n->params, ctx);                             \
    }

/* ---- op_impl definitions --------------------------------------------------------------------- */

/* `const op_impl op_impl_<op>`: min_in to max_in inputs, one output, the given flags. */
#define ELT_IMPL(op, min_in, max_in, fl, checkfn, inferfn, runfn)                                  \
    const op_impl op_impl_##op = {.min_inputs = min_in,                                            \
                                  .max_inputs = max_in,                                            \
                                  .min_outputs = 1,                                                \
                                  .max_outputs = 1,                                                \
                                  .flags = fl,                                                     \
                                  .check = checkfn,                                                \
                                  .infer = inferfn,                                                \
                                  .run = runfn};

/* One input, one output that may overwrite it. */
#define ELT_UNARY_IMPL(op, checkfn, inferfn, runfn)                                                \
    ELT_IMPL(op, 1, 1, OP_INPLACE_0, checkfn, inferfn, runfn)
/* Two inputs, one output, the given flags. */
#define ELT_BINARY_IMPL(op, fl, checkfn, inferfn, runfn)                                           \
    ELT_IMPL(op, 2, 2, fl, checkfn, inferfn, runfn)
/* 1 to 127 inputs, one output that may overwrite input 0. */
#define ELT_VARIADIC_IMPL(op, checkfn, inferfn, runfn)                                             \
    ELT_IMPL(op, 1, 127, OP_INPLACE_0, checkfn, inferfn, runfn)

/* ---- float -> integer conversion ------------------------------------------------------------
 *
 * C leaves NaN and out-of-range float -> int conversions undefined. anvil defines them the way
 * ONNX Runtime behaves on x86-64 (checked against onnxruntime 1.31): truncate toward zero; for
 * targets of up to 32 bits (other than UINT32) go through int32 and keep the low bits, with NaN
 * or out-of-int32-range values giving INT32_MIN; INT64 gives INT64_MIN for NaN or out of range;
 * UINT32/UINT64 wrap values of the signed range, convert [2^(N-1), 2^N) exactly, give 0 at or
 * above 2^N and 2^(N-1) for NaN or below the signed range. (For UINT32, ONNX Runtime's scalar
 * tail loop disagrees with its own vector loop on out-of-range values; this follows the vector
 * loop, which handles all but the last few elements of a tensor.) */
static inline int32_t op_elt_f2i32(double v) {
    return (v >= -2147483648.0 && v < 2147483648.0) ? (int32_t)v : INT32_MIN;
}
static inline int64_t op_elt_f2i64(double v) {
    return (v >= -9223372036854775808.0 && v < 9223372036854775808.0) ? (int64_t)v : INT64_MIN;
}
static inline uint32_t op_elt_f2u32(double v) {
    if (v >= 2147483648.0) return v < 4294967296.0 ? (uint32_t)v : 0u;
    return (uint32_t)op_elt_f2i32(v);
}
static inline uint64_t op_elt_f2u64(double v) {
    if (v >= 9223372036854775808.0) return v < 18446744073709551616.0 ? (uint64_t)v : 0u;
    return (uint64_t)op_elt_f2i64(v);
}

/* ---- header-only helpers for the binary ops ------------------------------------------------- */

/* Defines `static void name` (an op_elt_row2) whose operands have storage type T, loaded through
 * LD into the compute type C, and whose output has storage type TO, stored through OST:
 * out[i] = OST(EXPR(C, u, v)). Used where the output type differs from the operands' (the
 * comparisons write bool) as well as for plain binary arithmetic (TO = T, OST = the store). The
 * strides are 0 or 1 (see op_elt_binary_run). */
#define ELT_DEF_ROW2_TO(name, EXPR, T, C, LD, TO, OST)                                             \
    static void name(void *out, const void *a, const void *b, ptrdiff_t sa, ptrdiff_t sb,          \
                     size_t n) {                                                                   \
        TO *o = out;                                                                               \
        const T *x = a, *y = b;                                                                    \
        for (size_t i = 0; i < n; i++) {                                                           \
            C u = (C)LD(x[(ptrdiff_t)i * sa]), v = (C)LD(y[(ptrdiff_t)i * sb]);                    \
            o[i] = OST(EXPR(C, u, v));                                                             \
        }                                                                                          \
    }

/* Defines `static void <op>_row_<tag>` (an op_elt_row2 whose output has the operands' dtype). */
#define ELT_DEF_ROW2_SAME(op, EXPR, tag, DT, T, C, LD, ST)                                         \
    ELT_DEF_ROW2_TO(op##_row_##tag, EXPR, T, C, LD, T, ST)

/* Defines `static void <op>_row_<tag>` for an integer T computing in int64_t (I64) or uint64_t
 * (U64) and truncating to T on store. */
#define ELT_DEF_ROW2_I64(op, EXPR, tag, DT, T, C, LD, ST)                                          \
    ELT_DEF_ROW2_TO(op##_row_##tag, EXPR, T, int64_t, ELT_ID, T, (T))
#define ELT_DEF_ROW2_U64(op, EXPR, tag, DT, T, C, LD, ST)                                          \
    ELT_DEF_ROW2_TO(op##_row_##tag, EXPR, T, uint64_t, ELT_ID, T, (T))

/* INVALID_MODEL unless the node's opset has the op: `since` is the first opset whose schema
 * defines it. */
static inline anvil_status op_elt_require_opset(const ir_node *n, int since) {
    if (n->opset >= since) return ANVIL_OK;
    return core_err(ANVIL_ERR_INVALID_MODEL,
                    "%s: %s exists from opset %d on, but the model imports opset %d; raise the "
                    "model's opset to %d or more",
                    ir_node_label(n), ir_op_name(n->op), since, n->opset, since);
}

/* Shape inference of a broadcasting binary op: input 0's dtype must be in mask, input 1 must
 * have the same dtype, and output 0 gets out_dtype (UNDEFINED: input 0's dtype) and the numpy
 * broadcast of the two shapes. */
static inline anvil_status op_elt_binary_infer(const ir_node *n, const op_tinfo *in, int n_in,
                                               op_tinfo *out, int n_out, uint32_t mask,
                                               anvil_dtype out_dtype) {
    if (n_in < 2 || n_out < 1)
        return core_err(ANVIL_ERR_INTERNAL, "%s: inference called with %d inputs, %d outputs",
                        ir_node_label(n), n_in, n_out);
    CORE_TRY(op_elt_require(n, 0, in[0].dtype, mask));
    if (in[1].dtype != in[0].dtype)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 1 has dtype %s but input 0 has %s; both inputs must have the "
                        "same dtype (insert a Cast)",
                        ir_node_label(n), anvil_dtype_name(in[1].dtype),
                        anvil_dtype_name(in[0].dtype));
    out[0].dtype = out_dtype == ANVIL_DTYPE_UNDEFINED ? in[0].dtype : out_dtype;
    out[0].value = NULL;
    return op_broadcast_shape(n, &in[0].shape, &in[1].shape, &out[0].shape);
}

/* The logistic function 1/(1+e^-x), computed as e^x/(1+e^x) for negative x so that neither
 * branch takes exp of a large positive number. */
static inline float op_elt_sigmoid_f(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
static inline double op_elt_sigmoid_d(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
#define OP_ELT_SIGMOID(v) _Generic((v), double : op_elt_sigmoid_d, default : op_elt_sigmoid_f)(v)

#endif
